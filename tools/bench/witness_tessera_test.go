package bench

// provlog's witness against Tessera v1.0.4, an independent C2SP
// implementation, both ways:
//
//   - pull mode (witness/pull, provlog-witness check) follows a Tessera
//     POSIX log served as plain files, proves consistency from its tiles,
//     and catches a second Tessera log signing another history with the
//     same key;
//   - Tessera's own witness client (AppendOptions.WithWitnesses) submits
//     its checkpoints to provlog's add-checkpoint server and publishes them
//     with provlog's cosignature, which log.OpenWitnessedCheckpoint accepts.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/transparency-dev/tessera"
	"github.com/transparency-dev/tessera/storage/posix"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness/pull"
	wserver "github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

// witnessTesseraLog is a Tessera POSIX log served over HTTP as files.
type witnessTesseraLog struct {
	app     *tessera.Appender
	awaiter *tessera.PublicationAwaiter
	srv     *httptest.Server
	tag     string
	n       int
}

func newWitnessTesseraLog(t *testing.T, ctx context.Context, s note.Signer, tag string, extra func(*tessera.AppendOptions) *tessera.AppendOptions) *witnessTesseraLog {
	t.Helper()
	dir := t.TempDir()
	drv, err := posix.New(ctx, posix.Config{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	opts := tessera.NewAppendOptions().
		WithCheckpointSigner(s).
		WithBatching(64, 20*time.Millisecond).
		WithCheckpointInterval(100 * time.Millisecond)
	if extra != nil {
		opts = extra(opts)
	}
	app, shutdown, reader, err := tessera.NewAppender(ctx, drv, opts)
	if err != nil {
		t.Fatalf("tessera.NewAppender: %v", err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown(sctx)
	})
	l := &witnessTesseraLog{
		app:     app,
		awaiter: tessera.NewPublicationAwaiter(ctx, reader.ReadCheckpoint, 10*time.Millisecond),
		srv:     httptest.NewServer(http.FileServer(http.Dir(dir))),
		tag:     tag,
	}
	t.Cleanup(l.srv.Close)
	return l
}

// grow adds entries until the log has n and waits until a checkpoint
// covering them is published; it returns that checkpoint.
func (l *witnessTesseraLog) grow(t *testing.T, ctx context.Context, n int) []byte {
	t.Helper()
	var last tessera.IndexFuture
	for ; l.n < n; l.n++ {
		last = l.app.Add(ctx, tessera.NewEntry(fmt.Appendf(nil, "%s entry %d", l.tag, l.n)))
	}
	_, cp, err := l.awaiter.Await(ctx, last)
	if err != nil {
		t.Fatalf("awaiting publication: %v", err)
	}
	return cp
}

func witnessTesseraKey(t *testing.T, origin string) (note.Signer, note.Verifier) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	return s, v
}

// TestWitnessPullTesseraPOSIX: provlog-witness's pull mode on a Tessera
// POSIX log, and on a misbehaving twin made with the same key.
func TestWitnessPullTesseraPOSIX(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, v := witnessTesseraKey(t, "tessera.example/pulled")
	l := newWitnessTesseraLog(t, ctx, s, "honest", nil)
	store := witnesstest.NewStore()
	check := func(srv *httptest.Server) (*pull.Result, error) {
		return pull.Check(ctx, pull.Options{URL: srv.URL, Verifier: v, Store: store, Client: srv.Client()})
	}

	var prev uint64
	for _, n := range []int{3, 200, 256, 257, 1000, 3001} {
		cp := l.grow(t, ctx, n)
		c, err := log.ParseCheckpointNote(cp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := check(l.srv)
		if err != nil {
			t.Fatalf("check at size %d: %v", c.Size, err)
		}
		if res.Current.Size < c.Size || (!res.Recorded && res.Current.Size != prev) {
			t.Fatalf("check at size %d: %+v", c.Size, res)
		}
		if prev > 0 && res.Recorded && res.Previous.Size != prev {
			t.Fatalf("previous %d, want %d", res.Previous.Size, prev)
		}
		prev = res.Current.Size
	}

	// The twin signs another history with the same key. Larger: a fork
	// shown by its own tiles.
	twin := newWitnessTesseraLog(t, ctx, s, "evil", nil)
	twin.grow(t, ctx, 4000)
	res, err := check(twin.srv)
	if !errors.Is(err, pull.ErrFork) || res.Evidence == nil {
		t.Fatalf("twin: %v", err)
	}
	if err := res.Evidence.Verify(v); err != nil {
		t.Fatalf("evidence: %v", err)
	}
	// Smaller, without the larger tree's tiles: a rollback.
	small := newWitnessTesseraLog(t, ctx, s, "small", nil)
	small.grow(t, ctx, 10)
	if _, err := check(small.srv); !errors.Is(err, pull.ErrRollback) {
		t.Fatalf("smaller twin: %v", err)
	}
	// The honest log is still consistent with the record.
	l.grow(t, ctx, 3100)
	if res, err := check(l.srv); err != nil || !res.Recorded {
		t.Fatalf("honest log after the twins: %+v, %v", res, err)
	}
}

// TestTesseraWitnessedByProvlog: Tessera's witness client gets provlog's
// add-checkpoint server to cosign every checkpoint it publishes.
func TestTesseraWitnessedByProvlog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, v := witnessTesseraKey(t, "tessera.example/witnessed")

	skey, vkey, err := log.GenerateCosignerKey(rand.Reader, "witness.example/provlog")
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := log.ParseCosignerKey(skey)
	w, err := wserver.New(wserver.Options{
		Signer: cs,
		Logs:   []wserver.Log{{Origin: v.Name(), Verifiers: []note.Verifier{v}}},
		Store:  witnesstest.NewStore(),
	})
	if err != nil {
		t.Fatal(err)
	}
	wsrv := httptest.NewServer(w)
	defer wsrv.Close()
	u, _ := url.Parse(wsrv.URL)
	tw, err := tessera.NewWitness(vkey, u)
	if err != nil {
		t.Fatalf("tessera.NewWitness(%s): %v", vkey, err)
	}
	group := tessera.NewWitnessGroup(1, tw)
	l := newWitnessTesseraLog(t, ctx, s, "witnessed", func(o *tessera.AppendOptions) *tessera.AppendOptions {
		return o.WithWitnesses(group, &tessera.WitnessOptions{Timeout: 10 * time.Second})
	})

	cv, _ := log.NewCosignatureVerifier(vkey)
	policy := log.WitnessPolicy{Witnesses: []note.Verifier{cv}, Threshold: 1}
	var last uint64
	for _, n := range []int{1, 10, 300, 1025} {
		cp := l.grow(t, ctx, n)
		c, _, err := log.OpenWitnessedCheckpoint(cp, v, policy)
		if err != nil {
			t.Fatalf("published checkpoint at %d entries: %v\n%s", n, err, cp)
		}
		if c.Size < last {
			t.Fatalf("size went back from %d to %d", last, c.Size)
		}
		last = c.Size
	}
}
