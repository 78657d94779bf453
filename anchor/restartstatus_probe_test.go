package anchor_test

import (
	"context"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
)

// TestProbeRestartCreditsFailedAuthority: TSA 1 is down; a round anchors
// with TSA 0 alone (the record holds TSA 0's token only) and TSA 1 is
// reported failing, never having succeeded. After a restart (a new
// Runner over the same records) the status says TSA 1 last succeeded at
// that record's time: NewRunner sets every authority's lastSuccess to the
// newest record's Created, whether or not its token or entry is in it.
// provlog__status and /healthz's "anchoring" then show a success that
// never happened (and, failures reset to 0, the authority as healthy).
//
// Observed: before the restart TSA 1 LastSuccess is zero with 1 failure;
// after it, LastSuccess = the record's Created.
//
// Cause: anchor/online/runner.go NewRunner ("for _, a := range r.auths {
// a.lastSuccess = t }"). Fix: credit only the authorities whose URL has a
// timestamp or tlog entry in the newest record (or the newest record
// holding one of theirs).
func TestProbeRestartCreditsFailedAuthority(t *testing.T) {
	e := newEnv(t, 2, false)
	e.tsas[1].SetFault(testtsa.Down)
	r := e.runner(nil)
	st, err := r.AnchorNow(context.Background())
	if err != nil && st == nil {
		t.Fatal(err)
	}
	if len(st.Record.Timestamps) != 1 {
		t.Fatalf("the record holds %d tokens, want TSA 0's alone", len(st.Record.Timestamps))
	}
	before := r.Status().Authorities[1]
	if !before.LastSuccess.IsZero() || before.ConsecutiveFailures != 1 {
		t.Fatalf("TSA 1 before the restart: %+v", before)
	}
	after := e.runner(nil).Status().Authorities[1]
	if !after.LastSuccess.IsZero() {
		t.Errorf("after a restart, TSA 1 (down, in no record) is reported as last succeeding at %s, the time of a record without its token", after.LastSuccess)
	}
}
