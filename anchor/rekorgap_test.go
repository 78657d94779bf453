package anchor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
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
	forkRefused(t, "Rekor forked after a round it was down", r)
	// A runner started afresh on the same records links to the same entry.
	e.appendN(1)
	forkRefused(t, "after a restart, Rekor forked again", e.runner(nil))
}

// forkRefused anchors once with r, whose Rekor forked: the TSA's token
// may be stored, Rekor's entry must not be, and Rekor's status must say
// Rekor fork.
func forkRefused(t *testing.T, what string, r *online.Runner) {
	t.Helper()
	st, err := r.AnchorNow(context.Background())
	if err != nil && !strings.Contains(err.Error(), "Rekor fork") {
		t.Fatalf("%s: %v", what, err)
	}
	if st != nil && len(st.Record.Tlogs) != 0 {
		t.Errorf("%s: record %q stored with %d Rekor entries; want the entry refused as a Rekor fork", what, st.Name, len(st.Record.Tlogs))
	}
	if a := r.Status().Authorities[1]; !strings.Contains(a.LastError, "Rekor fork") {
		t.Errorf("%s: Rekor's status %+v; want its last error to say Rekor fork", what, a)
	}
}

// TestRekorNewTreeSaid: Rekor leaves the tree it showed for a fresh one
// under another tree ID (as it does when it starts a new shard, and as a
// fork may claim). The new tree's entry cannot be linked to the old
// tree's: it is kept, but not in silence: Rekor's status and the audit
// must name it as unlinked, as they name an entry whose proof Rekor did
// not give. On the base it was stored with nothing said: Rekor's status
// without error, and the audit naming 0 records unlinked.
func TestRekorNewTreeSaid(t *testing.T) {
	e := newEnv(t, 0, true)
	r := e.runner(nil)
	ctx := context.Background()
	for i := range 2 {
		if _, err := r.AnchorNow(ctx); err != nil {
			t.Fatalf("anchor %d: %v", i, err)
		}
		e.appendN(1)
	}
	e.rekor.SetFault(fakerekor.NewTree)
	st, err := r.AnchorNow(ctx)
	if err != nil || len(st.Record.Tlogs) != 1 {
		t.Fatalf("Rekor on a new tree: %v; want its entry kept", err)
	}
	if s := r.Status().Authorities[0]; !strings.Contains(s.LastError, "tree") {
		t.Errorf("Rekor's status after it moved to a new tree: last error %q; want it to say so", s.LastError)
	}
	rep, err := e.audit()
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if len(rep.RekorUnlinked) != 1 || rep.RekorUnlinked[0] != st.Name {
		t.Errorf("audit names %q unlinked; want %s, whose Rekor entry is of a new tree", rep.RekorUnlinked, st.Name)
	}
	// On the new tree, the next entry is linked again.
	e.rekor.SetFault(fakerekor.OK)
	e.appendN(1)
	if st, err = r.AnchorNow(ctx); err != nil || st.Record.Tlogs[0].RekorV1.Consistency == nil {
		t.Fatalf("the next entry on the new tree: %v; want it linked", err)
	}
	if rep, err = e.audit(); err != nil || len(rep.RekorUnlinked) != 1 {
		t.Errorf("audit: %v, unlinked %q", err, rep.RekorUnlinked)
	}
}
