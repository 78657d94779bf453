package anchor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/online"
)

// TestRekorProofDown: Rekor takes every entry but its consistency-proof
// endpoint (GET /api/v1/log/proof) answers 503. The entry Rekor made is
// in Rekor for good and verified on its own (inclusion proof, SET,
// checkpoint): it must be kept in the round's record, unlinked (the audit
// names it so), and Rekor's status must say that its proof could not be
// fetched. On the base every such round dropped the entry it had made
// (3 entries made in Rekor, 0 kept) and counted Rekor as failing, so each
// retry made one more entry in Rekor.
func TestRekorProofDown(t *testing.T) {
	e := newEnv(t, 1, true)
	proofDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/api/v1/log/proof" {
			http.Error(w, "proof service unavailable", http.StatusServiceUnavailable)
			return
		}
		e.rekor.ServeHTTP(w, req)
	}))
	defer proofDown.Close()
	e.cfg.Rekor = &online.RekorConfig{URL: proofDown.URL, PublicKey: string(e.rekor.PublicKeyPEM())}
	var err error
	if e.resolved, err = e.cfg.Resolve(nil); err != nil {
		t.Fatal(err)
	}
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatalf("first anchor: %v", err)
	}
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
	var rs online.AuthorityStatus
	for _, a := range r.Status().Authorities {
		if a.Kind == "rekor.v1" {
			rs = a
		}
	}
	if rs.ConsecutiveFailures != 0 || !strings.Contains(rs.LastError, "consistency proof") {
		t.Errorf("Rekor's status: %d consecutive failures, last error %q; want 0 and an error naming the consistency proof", rs.ConsecutiveFailures, rs.LastError)
	}
	rep, err := e.audit()
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if len(rep.RekorUnlinked) != kept {
		t.Errorf("audit names %d records unlinked, want %d: %q", len(rep.RekorUnlinked), kept, rep.RekorUnlinked)
	}
}
