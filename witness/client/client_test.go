package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

const origin = "log.example/client"

// testWitness is a real witness (witness/server) serving over HTTP, and
// counting the requests it gets.
type testWitness struct {
	signer   *log.CosignatureSigner
	w        *server.Witness
	srv      *httptest.Server
	requests atomic.Int64
	down     atomic.Bool // answer 503
	// hold, while not nil, holds each request until it is closed; open
	// counts the requests held.
	hold atomic.Pointer[chan struct{}]
	open atomic.Int64
}

func newTestWitness(t *testing.T, name string, logs ...witnesstest.Key) *testWitness {
	t.Helper()
	return newTestWitnessOn(t, witnesstest.NewStore(), witnesstest.NewCosigner(t, name), logs...)
}

// newTestWitnessOn is newTestWitness keeping its state in store and
// signing with signer.
func newTestWitnessOn(t *testing.T, store witness.Store, signer *log.CosignatureSigner, logs ...witnesstest.Key) *testWitness {
	t.Helper()
	tw := &testWitness{signer: signer}
	var ls []server.Log
	for _, k := range logs {
		ls = append(ls, server.Log{Origin: k.Verifier.Name(), Verifiers: []note.Verifier{k.Verifier}})
	}
	w, err := server.New(server.Options{Signer: tw.signer, Logs: ls, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	tw.w = w
	tw.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		tw.requests.Add(1)
		if hold := tw.hold.Load(); hold != nil {
			tw.open.Add(1)
			<-*hold
			tw.open.Add(-1)
		}
		if tw.down.Load() {
			http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.ServeHTTP(rw, r)
	}))
	t.Cleanup(tw.srv.Close)
	return tw
}

// client returns a Witness for tw over HTTP, proving from l's nodes.
func (tw *testWitness) client(t *testing.T, l *witnesstest.Log) *Witness {
	t.Helper()
	h, err := NewHTTP(tw.srv.URL, tw.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return NewWitness(h, tw.signer.Verifier(), l.Store)
}

func TestWitnessCosign(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	tw := newTestWitness(t, "witness.example/w1", k)

	for name, mk := range map[string]func() *Witness{
		"http":       func() *Witness { return tw.client(t, l) },
		"in-process": func() *Witness { return NewWitness(tw.w, tw.signer.Verifier(), l.Store) },
	} {
		t.Run(name, func(t *testing.T) {
			// A fresh client starts at 0 and learns the witness's size
			// from a 409 (after the first subtest, the witness is ahead).
			c := mk()
			start, _ := l.Seq.Checkpoint()
			for _, n := range []uint64{start + 1, start + 2, start + 9, start + 9, start + 40} {
				cp := l.Grow(t, n)
				sigs, err := c.Cosign(ctx, cp)
				if err != nil {
					t.Fatalf("Cosign(size %d): %v", n, err)
				}
				cosigned, err := witness.AddCosignatures(cp, sigs)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := log.OpenWitnessedCheckpoint(cosigned, k.Verifier, log.WitnessPolicy{Witnesses: []note.Verifier{tw.signer.Verifier()}, Threshold: 1}); err != nil {
					t.Fatalf("cosigned checkpoint: %v", err)
				}
				if c.Size() != n {
					t.Errorf("Size() = %d, want %d", c.Size(), n)
				}
			}
		})
	}
}

// TestWitnessConflict: the witness follows the honest log; a second
// sequencer with the same key (the misbehaving log, a fresh one for each
// case) gets conflicts, never cosignatures. The evil log of size 15 never
// held a tree of size 20: one that did would be merely behind
// (TestSharedLogLaggingSidecarNoConflict), and its conflict shows when it
// submits that size.
func TestWitnessConflict(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	tw := newTestWitness(t, "witness.example/w1", k)
	if _, err := tw.client(t, honest).Cosign(ctx, honest.Grow(t, 20)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size        uint64
		status      int
		witnessSize uint64
		detail      string
	}{
		{25, 422, 20, "refused the log's consistency proof from size 20 to 25"},
		{20, 409, 20, "another root hash at size 20"},
		{15, 409, 20, "it cosigned size 20, larger than the log's checkpoint of size 15"},
	} {
		evil := witnesstest.NewLog(t, k, fmt.Sprint("evil", tc.size))
		c := tw.client(t, evil)
		_, err := c.Cosign(ctx, evil.Grow(t, tc.size))
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("size %d: error %v, want a ConflictError", tc.size, err)
		}
		if ce.Status != tc.status || ce.WitnessSize != tc.witnessSize || ce.Size != tc.size || ce.Witness != "witness.example/w1" || !strings.Contains(ce.Detail, tc.detail) {
			t.Errorf("size %d: %+v", tc.size, ce)
		}
		e, err := ConflictEntry(ce, evil.Checkpoint(t, tc.size), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		pe, err := log.ParseEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := witness.ParseConflict(pe)
		if err != nil || got.Witness != "witness.example/w1" || got.Status != tc.status || got.CheckpointSize != tc.size ||
			got.WitnessSize != tc.witnessSize || got.Checkpoint != string(evil.Checkpoint(t, tc.size)) || pe.Actor != "provlog" {
			t.Errorf("conflict entry %s: %+v, %v", e, got, err)
		}
	}
	// The honest log goes on.
	if _, err := tw.client(t, honest).Cosign(ctx, honest.Grow(t, 30)); err != nil {
		t.Fatal(err)
	}
}

// TestWitnessRefusals: refusals that are not conflicts come back as
// *witness.Error, and a response that is not a valid cosignature fails.
func TestWitnessRefusals(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "x")
	cp := l.Grow(t, 3)

	unknown := newTestWitness(t, "witness.example/w1") // follows no log
	_, err := unknown.client(t, l).Cosign(ctx, cp)
	var we *witness.Error
	if !errors.As(err, &we) || we.Status != 404 {
		t.Errorf("unknown log: %v", err)
	}

	otherKey := newTestWitness(t, "witness.example/w1", witnesstest.NewKey(t, origin))
	_, err = otherKey.client(t, l).Cosign(ctx, cp)
	if !errors.As(err, &we) || we.Status != 403 {
		t.Errorf("other key: %v", err)
	}

	// A witness whose answers are not what it should say.
	good := newTestWitness(t, "witness.example/w1", k)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"bad 409 body", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", witness.ContentTypeSize)
			rw.WriteHeader(409)
			fmt.Fprint(rw, "three\n")
		}, "is not a size"},
		{"409 past any log", func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", witness.ContentTypeSize)
			rw.WriteHeader(409)
			fmt.Fprint(rw, "9007199254740993\n") // 2^53+1: a conflict entry could not hold it exactly
		}, "409 naming size 9007199254740993, beyond any log's"},
		{"garbage 200", func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "hello\n") }, "malformed response"},
		{"another witness's cosignature", func(rw http.ResponseWriter, r *http.Request) {
			other := witnesstest.NewCosigner(t, "witness.example/w2")
			req, _ := witness.ParseAddCheckpoint(readAll(r))
			n, _ := note.Open(req.Checkpoint, note.VerifierList(k.Verifier))
			msg, _ := note.Sign(&note.Note{Text: n.Text}, other)
			rw.Write(msg[strings.LastIndex(string(msg), "\n\n")+2:])
		}, "no cosignature by its key"},
		{"forged cosignature", func(rw http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			good.w.ServeHTTP(rec, r)
			b := []byte(rec.Body.String())
			if b[len(b)-5] == 'A' {
				b[len(b)-5] = 'B'
			} else {
				b[len(b)-5] = 'A'
			}
			rw.Write(b)
		}, "does not verify"},
		{"500", func(rw http.ResponseWriter, r *http.Request) { http.Error(rw, "oops", 500) }, "500 Internal Server Error: oops"},
	} {
		srv := httptest.NewServer(tc.handler)
		h, _ := NewHTTP(srv.URL+"/", srv.Client())
		_, err := NewWitness(h, good.signer.Verifier(), l.Store).Cosign(ctx, cp)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		srv.Close()
	}
	if _, err := NewHTTP("ftp://x", nil); err == nil {
		t.Error("NewHTTP accepted ftp://")
	}
}

func readAll(r *http.Request) []byte {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// TestCosigner runs the policy over three witnesses: one is down at first,
// one follows a misbehaving twin of the log. Checkpoints submitted faster
// than the interval are coalesced; Latest reaches the newest checkpoint
// with two cosignatures; the conflict is reported once; the down witness
// is retried without new checkpoints.
func TestCosigner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	w1 := newTestWitness(t, "witness.example/w1", k)
	w2 := newTestWitness(t, "witness.example/w2", k)
	w3 := newTestWitness(t, "witness.example/w3", k)
	// w3 has seen the evil twin at a larger size than the log will have.
	if _, err := w3.client(t, evil).Cosign(ctx, evil.Grow(t, 500)); err != nil {
		t.Fatal(err)
	}
	w3.requests.Store(0)
	w2.down.Store(true)

	var (
		mu        sync.Mutex
		conflicts []*ConflictError
		cosigned  [][]byte
	)
	c, err := NewCosigner(CosignerOptions{
		Log:        k.Verifier,
		Witnesses:  []*Witness{w1.client(t, l), w2.client(t, l), w3.client(t, l)},
		Threshold:  2,
		Interval:   50 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		OnCosigned: func(b []byte) { mu.Lock(); cosigned = append(cosigned, b); mu.Unlock() },
		OnConflict: func(ce *ConflictError, cp []byte) { mu.Lock(); conflicts = append(conflicts, ce); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()

	// 200 checkpoints as fast as the log makes them.
	for n := uint64(1); n <= 200; n++ {
		c.Submit(l.Grow(t, n))
	}
	// Only w1 answers: the policy is not met.
	time.Sleep(300 * time.Millisecond)
	if c.Latest() != nil {
		t.Fatal("Latest is set with one cosignature of two required")
	}
	// w2 comes back; the Cosigner retries the newest checkpoint by itself.
	w2.down.Store(false)
	proctest.WaitFor(t, "a cosigned checkpoint", func() bool { return c.Latest() != nil })
	latest := c.Latest()
	cp, _, err := log.OpenWitnessedCheckpoint(latest, k.Verifier, log.WitnessPolicy{
		Witnesses: []note.Verifier{w1.signer.Verifier(), w2.signer.Verifier(), w3.signer.Verifier()}, Threshold: 2})
	if err != nil {
		t.Fatalf("Latest does not meet the policy: %v", err)
	}
	if cp.Size != 200 {
		t.Errorf("Latest has size %d, want 200", cp.Size)
	}
	// Coalesced: far fewer requests than checkpoints.
	if n := w1.requests.Load(); n > 60 {
		t.Errorf("w1 got %d requests for 200 checkpoints", n)
	}

	// A receipt with the cosigned checkpoint verifies under the policy.
	p, err := log.ProveInclusion(ctx, l.Store, 123, 200)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := l.Store.Entries(ctx, 123, 124)
	r := &log.Receipt{Index: 123, Proof: p, Checkpoint: latest}
	if _, err := r.VerifyWitnessed(log.LeafHash(entries[0]), k.Verifier, []note.Verifier{w1.signer.Verifier(), w2.signer.Verifier(), w3.signer.Verifier()}, 2); err != nil {
		t.Errorf("receipt on the cosigned checkpoint: %v", err)
	}

	// More checkpoints: the conflict with w3 is not reported again.
	for n := uint64(201); n <= 210; n++ {
		c.Submit(l.Grow(t, n))
		time.Sleep(20 * time.Millisecond)
	}
	proctest.WaitFor(t, "the checkpoint at size 210 cosigned", func() bool {
		cp, _ := log.ParseCheckpointNote(c.Latest())
		return cp.Size == 210
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conflicts) != 1 || conflicts[0].Witness != "witness.example/w3" || conflicts[0].WitnessSize != 500 {
		t.Errorf("conflicts %+v, want one from w3 at size 500", conflicts)
	}
	if len(cosigned) == 0 || string(cosigned[len(cosigned)-1]) != string(c.Latest()) {
		t.Error("OnCosigned did not get the latest cosigned checkpoint")
	}
	st := c.Status()
	if st.Threshold != 2 || st.CosignedSize != 210 || len(st.Witnesses) != 3 || st.Witnesses[2].Conflict == "" || st.Witnesses[0].Size != 210 {
		t.Errorf("status %+v", st)
	}

	// A new Cosigner starts from the saved checkpoint.
	c2, err := NewCosigner(CosignerOptions{Log: k.Verifier, Witnesses: []*Witness{w1.client(t, l), w2.client(t, l)}, Threshold: 2, Initial: c.Latest()})
	if err != nil {
		t.Fatal(err)
	}
	if string(c2.Latest()) != string(c.Latest()) {
		t.Error("Initial was not taken")
	}
	c3, _ := NewCosigner(CosignerOptions{Log: k.Verifier, Witnesses: []*Witness{w1.client(t, l), w3.client(t, l)}, Threshold: 2, Initial: c.Latest()})
	if c3.Latest() != nil {
		t.Error("an Initial checkpoint short of the policy was taken")
	}
}

func TestNewCosignerRefuses(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "x")
	w1 := newTestWitness(t, "witness.example/w1", k)
	ws := []*Witness{w1.client(t, l)}
	for _, o := range []CosignerOptions{
		{Witnesses: ws, Threshold: 1},
		{Log: k.Verifier, Witnesses: ws, Threshold: 0},
		{Log: k.Verifier, Witnesses: ws, Threshold: 2},
		{Log: k.Verifier, Witnesses: append(ws, w1.client(t, l)), Threshold: 1},
	} {
		if _, err := NewCosigner(o); err == nil {
			t.Errorf("NewCosigner(%+v) succeeded", o)
		}
	}
}

// TestConflictsBounded: a witness that answers each round with a conflict
// of a size it has not named before causes at most maxConflictsPerWitness
// reports (each a witness.conflict entry, and so a new checkpoint and a
// new round); it caused one a round without end.
func TestConflictsBounded(t *testing.T) {
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "x")
	w := newTestWitness(t, "witness.example/w1", k)
	reported := 0
	c, err := NewCosigner(CosignerOptions{
		Log: k.Verifier, Witnesses: []*Witness{w.client(t, l)}, Threshold: 1,
		OnConflict: func(*ConflictError, []byte) { reported++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	cp := l.Grow(t, 3)
	for i := range 50 {
		ce := &ConflictError{Witness: "witness.example/w1", Size: 3, WitnessSize: uint64(i + 4), Status: 409, Detail: "spam"}
		c.tally(0, cp, cosignResult{err: ce}, time.Now())
		c.tally(0, cp, cosignResult{err: ce}, time.Now()) // the same again: not new
	}
	if reported != maxConflictsPerWitness {
		t.Errorf("%d conflicts reported, want %d", reported, maxConflictsPerWitness)
	}
}
