package anchor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
)

// TestRekorForkAcrossAGap: Rekor is down for one round (a TSA alone
// anchors it), then forks. The entry of the round after the gap must be
// linked to Rekor's entry in the newest record that holds one, not only
// to the record just before, which holds none: otherwise a Rekor that
// fails one round may fork unseen (its entry kept with no consistency
// proof, the audit noting only that it is unlinked). On the base the
// forked entry was stored.
func TestRekorForkAcrossAGap(t *testing.T) {
	e := newEnv(t, 1, true)
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatalf("first anchor: %v", err)
	}
	e.appendN(1)
	e.rekor.SetFault(fakerekor.Down)
	st, err := r.AnchorNow(ctx)
	if err != nil || len(st.Record.Tlogs) != 0 || len(st.Record.Timestamps) != 1 {
		t.Fatalf("with Rekor down: %v; want a record holding the TSA's token alone", err)
	}
	e.appendN(1)
	e.rekor.SetFault(fakerekor.Fork)
	st, err = r.AnchorNow(ctx)
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") || (st != nil && len(st.Record.Tlogs) != 0) {
		name, tlogs := "", 0
		if st != nil {
			name, tlogs = st.Name, len(st.Record.Tlogs)
		}
		t.Errorf("Rekor forked after a round it was down: record %q stored with %d Rekor entries, error %v; want the entry refused as a Rekor fork", name, tlogs, err)
	}
	// A runner started afresh on the same records links to the same entry.
	e.appendN(1)
	r2 := e.runner(nil)
	e.rekor.SetFault(fakerekor.Fork)
	st, err = r2.AnchorNow(ctx)
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") || (st != nil && len(st.Record.Tlogs) != 0) {
		t.Errorf("after a restart, Rekor forked again: error %v; want the entry refused as a Rekor fork", err)
	}
}
