package bench

// The tlog-tiles interoperability test: an independent C2SP client,
// Tessera v1.0.4's client package, reads provlog's HTTP log API over HTTP
// and verifies what it reads. Nothing here uses provlog's own proof or tile
// code on the client side.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api"
	"github.com/transparency-dev/tessera/api/layout"
	"github.com/transparency-dev/tessera/client"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

const interopOrigin = "interop.example/provlog"

// interopRounds are the log sizes after each round of appends; a checkpoint
// is saved after each. They cross entry-bundle and tile boundaries (255,
// 256, 257, 65536 is level-1 tile width) and end at a few thousand.
var interopRounds = []int{1, 2, 255, 256, 257, 600, 1024, 2047, 3001, 4321}

func TestTesseraClientReadsProvlogAPI(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) log.Storage
	}{
		{"logpebble", func(t *testing.T) log.Storage {
			s, err := logpebble.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatalf("logpebble.Open: %v", err)
			}
			return s
		}},
		{"memory", func(t *testing.T) log.Storage { return logtest.NewMemory() }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			t.Cleanup(func() { store.Close() })
			testInterop(t, store, nil)
		})
	}
	// Two sidecars on one PostgreSQL log: the appends go through both, the
	// client reads the second's API.
	t.Run("logpg, two sidecars", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		var stores [2]*logpg.Store
		for i := range stores {
			s, err := logpg.Open(t.Context(), dsn, nil)
			if err != nil {
				t.Fatalf("logpg.Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			stores[i] = s
		}
		testInterop(t, stores[1], stores[0])
	})
}

// testInterop appends through a sequencer on store (and, if other is not
// nil, through a second one on other, by turns: another sidecar on the
// same shared log) and reads store's API with Tessera's client.
func testInterop(t *testing.T, store, other log.Storage) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	skey, vkey, err := note.GenerateKey(rand.Reader, interopOrigin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatalf("OpenSequencer: %v", err)
	}
	t.Cleanup(func() { seq.Close() })
	appendTo := []*server.Sequencer{seq}
	if other != nil {
		s2, err := server.OpenSequencer(ctx, other, signer, verifier, nil)
		if err != nil {
			t.Fatalf("OpenSequencer: %v", err)
		}
		t.Cleanup(func() { s2.Close() })
		appendTo = append(appendTo, s2)
	}

	srv := httptest.NewServer(server.NewAPI(server.APIOptions{Store: store, Seq: seq}))
	t.Cleanup(srv.Close)
	root, err := url.Parse(srv.URL + "/log/")
	if err != nil {
		t.Fatal(err)
	}
	f, err := client.NewHTTPFetcher(root, srv.Client())
	if err != nil {
		t.Fatal(err)
	}

	// Append in rounds with concurrent appenders (so commits carry several
	// entries), keeping every entry by the index its receipt names, and
	// save the checkpoint the Tessera client fetches after each round.
	var (
		mu      sync.Mutex
		entries = map[uint64][]byte{}
		saved   []*savedCheckpoint
	)
	next := 0
	for _, size := range interopRounds {
		var wg sync.WaitGroup
		errs := make(chan error, size-next)
		work := make(chan int, size-next)
		for i := next; i < size; i++ {
			work <- i
		}
		close(work)
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					e := interopEntry(t, i)
					r, err := appendTo[w%len(appendTo)].Append(ctx, e)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					entries[r.Index] = e
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Append: %v", err)
		}
		next = size

		cp, raw, _, err := client.FetchCheckpoint(ctx, f.ReadCheckpoint, verifier, verifier.Name())
		// Another sidecar's last commit reaches this one's latest
		// checkpoint by notification, a moment later.
		for deadline := time.Now().Add(10 * time.Second); other != nil && (err != nil || cp.Size < uint64(size)) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			cp, raw, _, err = client.FetchCheckpoint(ctx, f.ReadCheckpoint, verifier, verifier.Name())
		}
		if err != nil {
			t.Fatalf("client.FetchCheckpoint after %d entries: %v", size, err)
		}
		if cp.Origin != interopOrigin || cp.Size != uint64(size) {
			t.Fatalf("checkpoint after %d entries: origin %q size %d", size, cp.Origin, cp.Size)
		}
		saved = append(saved, &savedCheckpoint{size: cp.Size, root: cp.Hash, raw: raw})
	}
	if len(entries) != next {
		t.Fatalf("receipts named %d distinct indices for %d appends", len(entries), next)
	}
	latest := saved[len(saved)-1]

	// A checkpoint signed by another key must not verify.
	_, otherV, _ := note.GenerateKey(rand.Reader, interopOrigin)
	ov, _ := note.NewVerifier(otherV)
	if _, _, _, err := client.FetchCheckpoint(ctx, f.ReadCheckpoint, ov, interopOrigin); err == nil {
		t.Errorf("FetchCheckpoint accepted the checkpoint with the wrong verifier")
	}

	// The compact range over the latest tree, read from hash tiles, hashes
	// to the checkpoint's root.
	rangeNodes, err := client.FetchRangeNodes(ctx, latest.size, f.ReadTile)
	if err != nil {
		t.Fatalf("client.FetchRangeNodes: %v", err)
	}
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, latest.size, rangeNodes)
	if err != nil {
		t.Fatalf("compact range from tiles: %v", err)
	}
	if got, err := rng.GetRootHash(nil); err != nil || !bytes.Equal(got, latest.root) {
		t.Fatalf("root from tile range nodes %x (err %v), checkpoint root %x", got, err, latest.root)
	}

	// Every entry, streamed with the client's bundle reader and parsed with
	// its api.EntryBundle, is what was appended at that index, and the
	// leaf hashes in the level-0 tiles are the hashes of those entries.
	leafHashes, err := client.FetchLeafHashes(ctx, f.ReadTile, 0, latest.size, latest.size)
	if err != nil {
		t.Fatalf("client.FetchLeafHashes: %v", err)
	}
	getSize := func(context.Context) (uint64, error) { return latest.size, nil }
	unbundle := func(b []byte) ([][]byte, error) {
		var eb api.EntryBundle
		if err := eb.UnmarshalText(b); err != nil {
			return nil, err
		}
		return eb.Entries, nil
	}
	streamed := uint64(0)
	for e, err := range client.Entries(client.EntryBundles(ctx, 4, getSize, f.ReadEntryBundle, 0, latest.size), unbundle) {
		if err != nil {
			t.Fatalf("streaming entries: %v", err)
		}
		if e.Index != streamed {
			t.Fatalf("streamed entry %d, want %d", e.Index, streamed)
		}
		if !bytes.Equal(e.Entry, entries[e.Index]) {
			t.Fatalf("entry %d from the bundles differs from the appended entry", e.Index)
		}
		if lh := rfc6962.DefaultHasher.HashLeaf(e.Entry); !bytes.Equal(lh, leafHashes[e.Index]) {
			t.Fatalf("entry %d: tile leaf hash %x, hash of the bundle entry %x", e.Index, leafHashes[e.Index], lh)
		}
		streamed++
	}
	if streamed != latest.size {
		t.Fatalf("streamed %d entries, want %d", streamed, latest.size)
	}

	// 200 random inclusion proofs in the latest tree, with leaf hashes from
	// entry bundles fetched by client.GetEntryBundle, plus the edges.
	pb, err := client.NewProofBuilder(ctx, latest.size, f.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	indices := []uint64{0, 255, 256, latest.size - 1}
	for range 200 {
		indices = append(indices, r.Uint64N(latest.size))
	}
	for _, i := range indices {
		b, err := client.GetEntryBundle(ctx, f.ReadEntryBundle, i/layout.EntryBundleWidth, latest.size)
		if err != nil {
			t.Fatalf("client.GetEntryBundle(%d): %v", i/layout.EntryBundleWidth, err)
		}
		e := b.Entries[i%layout.EntryBundleWidth]
		if !bytes.Equal(e, entries[i]) {
			t.Fatalf("bundle entry %d differs from the appended entry", i)
		}
		p, err := pb.InclusionProof(ctx, i)
		if err != nil {
			t.Fatalf("InclusionProof(%d): %v", i, err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, latest.size, rfc6962.DefaultHasher.HashLeaf(e), p, latest.root); err != nil {
			t.Fatalf("inclusion proof for %d in %d: %v", i, latest.size, err)
		}
		// A proof for the wrong leaf must fail.
		if i > 0 {
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, latest.size, rfc6962.DefaultHasher.HashLeaf(entries[i-1]), p, latest.root); err == nil {
				t.Fatalf("inclusion proof for %d verified with entry %d's leaf", i, i-1)
			}
		}
	}

	// Inclusion proofs in each earlier tree (partial tiles of smaller
	// widths than the latest tree's), and consistency proofs from each
	// earlier checkpoint to the latest one and between neighbours.
	for k, old := range saved {
		opb, err := client.NewProofBuilder(ctx, old.size, f.ReadTile)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []uint64{0, old.size / 2, old.size - 1} {
			p, err := opb.InclusionProof(ctx, i)
			if err != nil {
				t.Fatalf("InclusionProof(%d) at size %d: %v", i, old.size, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, old.size, rfc6962.DefaultHasher.HashLeaf(entries[i]), p, old.root); err != nil {
				t.Fatalf("inclusion proof for %d in %d: %v", i, old.size, err)
			}
		}
		p, err := pb.ConsistencyProof(ctx, old.size, latest.size)
		if err != nil {
			t.Fatalf("ConsistencyProof(%d, %d): %v", old.size, latest.size, err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old.size, latest.size, p, old.root, latest.root); err != nil {
			t.Fatalf("consistency %d -> %d: %v", old.size, latest.size, err)
		}
		if k > 0 {
			prev := saved[k-1]
			p, err := opb.ConsistencyProof(ctx, prev.size, old.size)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", prev.size, old.size, err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, prev.size, old.size, p, prev.root, old.root); err != nil {
				t.Fatalf("consistency %d -> %d: %v", prev.size, old.size, err)
			}
		}
	}

	// The client's LogStateTracker, started from the first saved
	// checkpoint, proves consistency to the latest one by itself.
	tr, err := client.NewLogStateTracker(ctx, f.ReadTile, saved[0].raw, verifier, interopOrigin, client.UnilateralConsensus(f.ReadCheckpoint))
	if err != nil {
		t.Fatalf("NewLogStateTracker: %v", err)
	}
	if _, _, _, err := tr.Update(ctx); err != nil {
		t.Fatalf("LogStateTracker.Update: %v", err)
	}
	if got := tr.Latest(); got.Size != latest.size || !bytes.Equal(got.Hash, latest.root) {
		t.Fatalf("tracker at size %d root %x, want %d %x", got.Size, got.Hash, latest.size, latest.root)
	}

	// And the client notices tampering: through a proxy that flips one bit
	// of leaf 5's hash in the first level-0 tile, the proof for leaf 4
	// (whose sibling is leaf 5) no longer verifies.
	h := server.NewAPI(server.APIOptions{Store: store, Seq: seq})
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if r.URL.Path == "/log/tile/0/000" && len(body) >= 6*log.HashSize {
			body[5*log.HashSize] ^= 1
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	defer bad.Close()
	badRoot, _ := url.Parse(bad.URL + "/log/")
	bf, err := client.NewHTTPFetcher(badRoot, bad.Client())
	if err != nil {
		t.Fatal(err)
	}
	bpb, err := client.NewProofBuilder(ctx, latest.size, bf.ReadTile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := bpb.InclusionProof(ctx, 4)
	if err != nil {
		t.Fatalf("InclusionProof(4) via the tampering proxy: %v", err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 4, latest.size, rfc6962.DefaultHasher.HashLeaf(entries[4]), p, latest.root); err == nil {
		t.Fatalf("inclusion proof built from a tampered tile verified")
	}
}

type savedCheckpoint struct {
	size uint64
	root []byte
	raw  []byte
}

// interopEntry is a provlog "call" entry with a few fields.
func interopEntry(t *testing.T, i int) []byte {
	e := log.Entry{
		Kind:  log.KindCall,
		Time:  time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC),
		Actor: "interop-test",
		Fields: map[string]any{
			"tool": "search",
			"n":    i,
			"args": map[string]any{"q": fmt.Sprintf("query %d", i)},
		},
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatalf("Entry.Marshal: %v", err)
	}
	return b
}
