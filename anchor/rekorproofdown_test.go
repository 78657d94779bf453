package anchor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/realsvc"
	"github.com/provlog/provlog/anchor/online"
)

// proofDownEnv is newEnv(t, 1, true) whose Rekor is reached through a
// front that answers its consistency-proof endpoint (GET
// /api/v1/log/proof) 503 while down is set.
func proofDownEnv(t *testing.T) (*env, *atomic.Bool) {
	e := newEnv(t, 1, true)
	return e, proofDownFront(t, e, e.rekor, string(e.rekor.PublicKeyPEM()))
}

// proofDownFront puts a front before rekor as e's Rekor, which answers
// its consistency-proof endpoint 503 while the flag returned is set.
func proofDownFront(t *testing.T, e *env, rekor http.Handler, key string) *atomic.Bool {
	var down atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/api/v1/log/proof" && down.Load() {
			http.Error(w, "proof service unavailable", http.StatusServiceUnavailable)
			return
		}
		rekor.ServeHTTP(w, req)
	}))
	t.Cleanup(front.Close)
	e.cfg.Rekor = &online.RekorConfig{URL: front.URL, PublicKey: key}
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	return &down
}

// rekorStatus returns Rekor's part of r's status.
func rekorStatus(r *online.Runner) online.AuthorityStatus {
	for _, a := range r.Status().Authorities {
		if a.Kind == "rekor.v1" {
			return a
		}
	}
	return online.AuthorityStatus{}
}

// TestRekorProofDown: Rekor takes every entry but its consistency-proof
// endpoint (GET /api/v1/log/proof) answers 503. The entry Rekor made is
// in Rekor for good and verified on its own (inclusion proof, SET,
// checkpoint): it must be kept in the round's record, unlinked (the audit
// names it so), and Rekor's status must say that its proof could not be
// fetched. On the base every such round dropped the entry it had made
// (3 entries made in Rekor, 0 kept) and counted Rekor as failing, so each
// retry made one more entry in Rekor.
func TestRekorProofDown(t *testing.T) {
	e, down := proofDownEnv(t)
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatalf("first anchor: %v", err)
	}
	down.Store(true)
	const rounds = 3
	before := e.rekor.Created()
	kept := 0
	for i := range rounds {
		e.appendN(1)
		st, err := r.AnchorNow(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		kept += len(st.Record.Tlogs)
	}
	made := e.rekor.Created() - before
	if made != rounds || kept != made {
		t.Errorf("with Rekor's proof endpoint down: %d entries made in Rekor over %d rounds, %d kept in the records; want %d and %d",
			made, rounds, kept, rounds, rounds)
	}
	if rs := rekorStatus(r); rs.ConsecutiveFailures != 0 || !strings.Contains(rs.LastError, "consistency proof") {
		t.Errorf("Rekor's status: %d consecutive failures, last error %q; want 0 and an error naming the consistency proof", rs.ConsecutiveFailures, rs.LastError)
	}
	rep, err := e.audit()
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if len(rep.RekorUnlinked) != kept {
		t.Errorf("audit names %d records unlinked, want %d: %q", len(rep.RekorUnlinked), kept, rep.RekorUnlinked)
	}
	// Rekor gives its proofs again: the next entry is linked, and the
	// audit accepts the link.
	down.Store(false)
	e.appendN(1)
	st, err := r.AnchorNow(ctx)
	if err != nil || len(st.Record.Tlogs) != 1 || st.Record.Tlogs[0].RekorV1.Consistency == nil {
		t.Fatalf("with Rekor's proofs back: %v, %+v; want a linked Rekor entry", err, st)
	}
	if _, err := e.audit(); err != nil {
		t.Errorf("audit after the linked entry: %v", err)
	}
}

// TestRekorForkBehindProofDown: Rekor forks in a round its proof
// endpoint is down, so its entry is kept unlinked; when the endpoint is
// back, the next entry must be linked to the newest entry that was
// linked (or the first), from which the fork shows, and refused as a
// Rekor fork. Linked to the unlinked entry, the fork stayed hidden for
// good: the entry of the forked tree was stored, and the audit passed.
func TestRekorForkBehindProofDown(t *testing.T) {
	e, down := proofDownEnv(t)
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatalf("first anchor: %v", err)
	}
	e.appendN(1)
	down.Store(true)
	e.rekor.SetFault(fakerekor.Fork)
	st, err := r.AnchorNow(ctx)
	if err != nil || len(st.Record.Tlogs) != 1 {
		t.Fatalf("Rekor forked, its proof endpoint down: %v; want its entry kept unlinked", err)
	}
	e.rekor.SetFault(fakerekor.OK) // its tree stays the forked one
	down.Store(false)
	for i, restart := range []bool{false, true} {
		e.appendN(1)
		rr := r
		if restart {
			rr = e.runner(nil) // links as a runner started afresh on the records
		}
		st, err = rr.AnchorNow(ctx)
		if err != nil || len(st.Record.Tlogs) != 0 || !strings.Contains(rekorStatus(rr).LastError, "Rekor fork") {
			t.Errorf("round %d after the fork (restart %v), Rekor's proofs back: %v, %d Rekor entries stored, Rekor's status %q; want the TSA's token alone and Rekor failing with a Rekor fork",
				i, restart, err, len(st.Record.Tlogs), rekorStatus(rr).LastError)
		}
	}
}

// TestRekorProofDownReal is TestRekorProofDown against the real
// rekor-server v1.5.4, its proof endpoint behind a front that answers
// 503 for two rounds: both entries are kept unlinked, and the entry after
// is linked to the first (the newest linked), which the audit accepts.
func TestRekorProofDownReal(t *testing.T) {
	rekorURL, rekorKey := realsvc.Rekor(t)
	e := newEnv(t, 0, false)
	e.cfg.Timeout = 20 * time.Second
	u, err := url.Parse(rekorURL)
	if err != nil {
		t.Fatal(err)
	}
	down := proofDownFront(t, e, httputil.NewSingleHostReverseProxy(u), pubPEM(t, rekorKey))
	r := e.runner(nil)
	ctx := context.Background()
	first, err := r.AnchorNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	for i := range 2 {
		e.appendN(1)
		st, err := r.AnchorNow(ctx)
		if err != nil || len(st.Record.Tlogs) != 1 || st.Record.Tlogs[0].RekorV1.Consistency != nil {
			t.Fatalf("round %d with the proof endpoint down: %v; want the entry kept unlinked", i, err)
		}
	}
	down.Store(false)
	e.appendN(1)
	st, err := r.AnchorNow(ctx)
	if err != nil || len(st.Record.Tlogs) != 1 || st.Record.Tlogs[0].RekorV1.Consistency == nil {
		t.Fatalf("with the proof endpoint back: %v; want a linked entry", err)
	}
	if got, want := st.Record.Tlogs[0].RekorV1.Consistency.Checkpoint, rekorLinkCheckpoint(t, first); got != want {
		t.Errorf("the entry after the outage is linked from %q, want the first entry's checkpoint %q", got, want)
	}
	rep, err := e.audit()
	if err != nil || rep.Verified != 4 || len(rep.RekorUnlinked) != 2 {
		t.Fatalf("audit: %+v, %v; want 4 verified, 2 unlinked", rep, err)
	}
}

// rekorLinkCheckpoint is the Rekor checkpoint of st's first Rekor entry.
func rekorLinkCheckpoint(t *testing.T, st *anchor.Stored) string {
	t.Helper()
	cp, err := st.Record.Tlogs[0].RekorV1.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return cp.Note
}
