package pull

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesspebble"
	"github.com/provlog/provlog/witness/witnesstest"
	"golang.org/x/mod/sumdb/note"
)

const origin = "log.example/pulled"

func check(t *testing.T, store witness.Store, url string, k witnesstest.Key) (*Result, error) {
	t.Helper()
	return Check(context.Background(), Options{URL: url, Verifier: k.Verifier, Store: store})
}

func recordedSize(t *testing.T, store witness.Store) uint64 {
	t.Helper()
	rec, err := store.Latest(context.Background(), origin)
	if err != nil || rec == nil {
		t.Fatalf("nothing recorded (%v)", err)
	}
	c, err := log.ParseCheckpointNote(rec)
	if err != nil {
		t.Fatal(err)
	}
	return c.Size
}

// pebbleSetup returns a witness store in Pebble and a real provlog log.
func pebbleSetup(t *testing.T) (witness.Store, witnesstest.Key, *witnesstest.Log) {
	t.Helper()
	kv, err := witnesspebble.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	k := witnesstest.NewKey(t, origin)
	return witness.KVStore(kv), k, witnesstest.NewLog(t, k, "e")
}

// TestCheckProvlog follows a real provlog log over its HTTP API through
// sizes that cross tile boundaries at every level used.
func TestCheckProvlog(t *testing.T) {
	store, k, l := pebbleSetup(t)
	var prev uint64
	for i, n := range []uint64{1, 2, 7, 255, 256, 257, 1000, 65535, 65536, 65537, 70001} {
		cp := l.GrowFast(t, n)
		c, _ := log.ParseCheckpointNote(cp)
		url := l.Prefix()
		if i%2 == 1 {
			url = l.Server.URL // the sidecar's base URL works too
		}
		res, err := check(t, store, url, k)
		if err != nil {
			t.Fatalf("size %d: %v", c.Size, err)
		}
		if !res.Recorded || res.Current.Size != c.Size || (i > 0) != (res.Previous != nil) {
			t.Fatalf("size %d: %+v", c.Size, res)
		}
		if i > 0 && res.Previous.Size != prev {
			t.Fatalf("previous size %d, want %d", res.Previous.Size, prev)
		}
		if got := recordedSize(t, store); got != c.Size {
			t.Fatalf("recorded %d, want %d", got, c.Size)
		}
		prev = c.Size
	}
	// Nothing new: nothing recorded, no error.
	res, err := check(t, store, l.Prefix(), k)
	if err != nil || res.Recorded || res.Stale || res.Current.Size != prev {
		t.Fatalf("unchanged log: %+v, %v", res, err)
	}
}

// splice serves the checkpoint cp and everything else from a log.
func splice(cp []byte, tilesFrom *witnesstest.Log) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/log/checkpoint" {
			rw.Write(cp)
			return
		}
		tilesFrom.Server.Config.Handler.ServeHTTP(rw, r)
	}))
}

// TestCheckForks uses a misbehaving log: two sequencers with one key and
// different entries. Every contradiction is caught, evidence verifies with
// the log's key alone, and the record stays.
func TestCheckForks(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")

	setup := func(t *testing.T, size uint64) witness.Store {
		store := witnesstest.NewStore()
		honest.Grow(t, size)
		srv := splice(honest.Checkpoint(t, size), honest)
		defer srv.Close()
		if _, err := check(t, store, srv.URL+"/log/", k); err != nil {
			t.Fatal(err)
		}
		if got := recordedSize(t, store); got != size {
			t.Fatalf("recorded %d, want %d", got, size)
		}
		return store
	}
	for _, tc := range []struct {
		name     string
		recorded uint64 // honest size recorded first
		serve    func(t *testing.T) *httptest.Server
		want     error
		kind     string
	}{
		{"larger tree, other history", 10, func(t *testing.T) *httptest.Server {
			evil.Grow(t, 20)
			return splice(evil.Checkpoint(t, 20), evil)
		}, ErrFork, witness.EvidenceFork},
		{"from a power-of-two size", 16, func(t *testing.T) *httptest.Server {
			evil.Grow(t, 40)
			return splice(evil.Checkpoint(t, 40), evil)
		}, ErrFork, witness.EvidenceFork},
		{"same size, other root", 12, func(t *testing.T) *httptest.Server {
			evil.Grow(t, 12)
			return splice(evil.Checkpoint(t, 12), evil)
		}, ErrFork, witness.EvidenceFork},
		{"smaller tree, larger one still served", 30, func(t *testing.T) *httptest.Server {
			evil.Grow(t, 12)
			return splice(evil.Checkpoint(t, 12), honest)
		}, ErrFork, witness.EvidenceFork},
		{"rollback", 300, func(t *testing.T) *httptest.Server {
			evil.Grow(t, 12)
			return splice(evil.Checkpoint(t, 12), evil)
		}, ErrRollback, witness.EvidenceRollback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := setup(t, tc.recorded)
			before, _ := store.Latest(context.Background(), origin)
			srv := tc.serve(t)
			defer srv.Close()
			res, err := check(t, store, srv.URL+"/log/", k)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if res == nil || res.Evidence == nil || res.Evidence.Kind != tc.kind {
				t.Fatalf("result %+v", res)
			}
			ev, perr := witness.ParseEvidence(res.Evidence.Marshal())
			if perr != nil {
				t.Fatal(perr)
			}
			verr := ev.Verify(k.Verifier)
			if tc.kind == witness.EvidenceFork && verr != nil {
				t.Fatalf("fork evidence does not verify: %v\n%s", verr, res.Evidence.Marshal())
			}
			if tc.kind == witness.EvidenceRollback && verr == nil {
				t.Fatalf("rollback evidence verifies as a fork")
			}
			after, _ := store.Latest(context.Background(), origin)
			if !bytes.Equal(before, after) {
				t.Fatal("the record changed")
			}
		})
	}

	// A stale checkpoint (a cache) consistent with the record: no error,
	// nothing recorded.
	store := setup(t, 50)
	srv := splice(honest.Checkpoint(t, 40), honest)
	defer srv.Close()
	res, err := check(t, store, srv.URL+"/log/", k)
	if err != nil || !res.Stale || res.Recorded {
		t.Fatalf("stale checkpoint: %+v, %v", res, err)
	}
	if recordedSize(t, store) != 50 {
		t.Fatal("the stale checkpoint was recorded")
	}
}

// TestCheckBadTiles: tiles that do not hash to the checkpoint are an
// error, not a fork, and nothing is recorded.
func TestCheckBadTiles(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "x")
	store := witnesstest.NewStore()
	l.Grow(t, 10)
	if _, err := check(t, store, l.Prefix(), k); err != nil {
		t.Fatal(err)
	}
	l.Grow(t, 20)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		l.Server.Config.Handler.ServeHTTP(rec, r)
		b := rec.Body.Bytes()
		if strings.Contains(r.URL.Path, "/tile/") && len(b) > 0 {
			b[0] ^= 1
		}
		rw.WriteHeader(rec.Code)
		rw.Write(b)
	}))
	defer srv.Close()
	res, err := check(t, store, srv.URL+"/log/", k)
	if err == nil || errors.Is(err, ErrFork) || errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "inconsistent tile") {
		t.Fatalf("corrupt tiles: %+v, %v", res, err)
	}
	if recordedSize(t, store) != 10 {
		t.Fatal("recorded despite corrupt tiles")
	}
	// A checkpoint signed by another key is refused.
	other := witnesstest.NewKey(t, origin)
	if _, err := check(t, store, l.Prefix(), other); err == nil {
		t.Fatal("checkpoint accepted with another key")
	}
}

// TestCheckRecordsLogSignatureOnly: a log's checkpoint carries its
// witnesses' cosignatures (or any lines the log likes); the check records
// the checkpoint with only the log's signature it verified.
func TestCheckRecordsLogSignatureOnly(t *testing.T) {
	store, k, l := pebbleSetup(t)
	cp := l.Grow(t, 9)
	n, err := note.Open(cp, note.VerifierList(k.Verifier))
	if err != nil {
		t.Fatal(err)
	}
	cosigned := cp
	for _, name := range []string{"witness.example/w1", "witness.example/w2"} {
		msg, err := note.Sign(&note.Note{Text: n.Text}, witnesstest.NewCosigner(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if cosigned, err = witness.AddCosignatures(cosigned, msg[bytes.LastIndex(msg, []byte("\n\n"))+2:]); err != nil {
			t.Fatal(err)
		}
	}
	srv := splice(cosigned, l)
	defer srv.Close()
	if _, err := check(t, store, srv.URL, k); err != nil {
		t.Fatal(err)
	}
	if rec, err := store.Latest(context.Background(), origin); err != nil || !bytes.Equal(rec, cp) {
		t.Errorf("recorded %q, %v; want the log's signed checkpoint %q", rec, err, cp)
	}
}

// TestCheckURLWithQuery: a log, or a sidecar's base URL, that carries a
// query (an API key a gateway wants and takes off) is followed at its paths with the
// query kept. Before, paths went after the query (/?k=K/checkpoint): the
// checkpoint was not found.
func TestCheckURLWithQuery(t *testing.T) {
	store, k, l := pebbleSetup(t)
	l.GrowFast(t, 300)
	var mu sync.Mutex
	bad := 0
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "k=K" {
			mu.Lock()
			bad++
			mu.Unlock()
		}
		r.URL.RawQuery = "" // the gateway's: the log API refuses a parameter it does not know
		l.Server.Config.Handler.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	for _, url := range []string{srv.URL + "/log/?k=K", srv.URL + "/?k=K", srv.URL + "?k=K"} {
		if res, err := check(t, store, url, k); err != nil || res.Current.Size != 300 {
			t.Errorf("%s: %+v, %v", url, res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != 0 {
		t.Errorf("%d requests without the URL's query", bad)
	}
}
