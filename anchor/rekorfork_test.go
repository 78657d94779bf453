package anchor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
)

// TestRekorForkAcrossRecords: each record's Rekor entry verifies on its
// own, but the Rekor checkpoints two records carry are of one origin and
// one tree size with different roots: Rekor showed two histories (here
// it forgot its tree and logged the second checkpoint into a new one).
// The audit must report a Rekor fork; on the base it passed.
func TestRekorForkAcrossRecords(t *testing.T) {
	e := newEnv(t, 0, true)
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.audit(); err != nil {
		t.Fatalf("one record: %v", err)
	}
	e.appendN(1)
	e.rekor.SetFault(fakerekor.Rollback)
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := e.audit()
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") {
		t.Fatalf("two records whose Rekor checkpoints of size 1 differ: audit error %v, want a Rekor fork", err)
	}
}
