package anchor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
)

// TestRekorForkAcrossRecords: Rekor forgets its tree and logs the second
// checkpoint into a new one, so its checkpoint of size 1 comes again with
// another root. The upload fetches no proof for equal sizes but compares
// the roots: the entry is refused as a Rekor fork and nothing is stored.
// (Before uploads were linked, the audit alone found it; see
// TestRekorForkOldRecords.)
func TestRekorForkAcrossRecords(t *testing.T) {
	e := newEnv(t, 0, true)
	r := e.runner(nil)
	ctx := context.Background()
	if _, err := r.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	e.appendN(1)
	e.rekor.SetFault(fakerekor.Rollback)
	if st, err := r.AnchorNow(ctx); err == nil || !strings.Contains(err.Error(), "Rekor fork") {
		t.Fatalf("Rekor's checkpoint of size 1 again with another root: AnchorNow %v, %v; want a Rekor fork", st, err)
	}
	if n := len(e.records_()); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

// oldRecord anchors e's log as a provlog that kept no Rekor consistency
// proof did: it anchors with a runner on a store of its own (so it links
// to nothing), links the record to e's newest by the log's consistency
// proof, stores it in e's store and logs its anchor entry.
func oldRecord(t *testing.T, e *env) *anchor.Stored {
	t.Helper()
	ctx := context.Background()
	prev, err := e.records.Last()
	if err != nil {
		t.Fatal(err)
	}
	own := e.records
	var oerr error
	if e.records, oerr = anchor.OpenStore(t.TempDir()); oerr != nil {
		t.Fatal(oerr)
	}
	// Its anchor entry is logged below, for the record in e's store.
	st, _ := e.runner(func(o *online.Options) { o.Log = noAppend{e.seq} }).AnchorNow(ctx)
	e.records = own
	if st == nil {
		t.Fatal("the old record was not made")
	}
	rec := st.Record
	proof, err := log.ProveConsistency(ctx, e.store, prev.Record.Size, rec.Size)
	if err != nil {
		t.Fatal(err)
	}
	rec.Previous = &anchor.Consistency{Size: prev.Record.Size, Root: prev.Record.Root, Proof: proof}
	if st, err = e.records.Put(rec); err != nil {
		t.Fatal(err)
	}
	sidecar, err := e.records.Sidecar()
	if err != nil {
		t.Fatal(err)
	}
	b, err := anchor.MarshalEntry(st, sidecar, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.seq.Append(ctx, b); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRekorForkOldRecords: records made before uploads were linked keep
// no Rekor consistency proof. They stay valid, and the audit says which
// they are; two of them whose Rekor checkpoints of one size differ are
// still a Rekor fork.
func TestRekorForkOldRecords(t *testing.T) {
	e := newEnv(t, 0, true)
	if _, err := e.runner(nil).AnchorNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.appendN(1)
	old := oldRecord(t, e)
	rep, err := e.audit()
	if err != nil || rep.Verified != 2 || !slices.Equal(rep.RekorUnlinked, []string{old.Name}) {
		t.Fatalf("a record without the Rekor proof: audit %+v, %v; want it valid and named in RekorUnlinked", rep, err)
	}
	e.appendN(1)
	e.rekor.SetFault(fakerekor.Rollback)
	oldRecord(t, e)
	_, err = e.audit()
	if err == nil || !strings.Contains(err.Error(), "Rekor fork") {
		t.Fatalf("two records whose Rekor checkpoints of size 2 differ: audit error %v, want a Rekor fork", err)
	}
}

// TestRekorRolledBack: Rekor, having shown its checkpoint of size 2,
// answers with one of size 1 (it forgot its tree; a replica behind shows
// the same). The entry is refused, saying so, and nothing is stored.
func TestRekorRolledBack(t *testing.T) {
	e := newEnv(t, 0, true)
	r := e.runner(nil)
	ctx := context.Background()
	for i := range 2 {
		if _, err := r.AnchorNow(ctx); err != nil {
			t.Fatalf("anchor %d: %v", i, err)
		}
		e.appendN(1)
	}
	e.rekor.SetFault(fakerekor.Rollback)
	if st, err := r.AnchorNow(ctx); err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("Rekor's checkpoint of size 1 after one of size 2: AnchorNow %v, %v; want it refused as rolled back", st, err)
	}
	if n := len(e.records_()); n != 2 {
		t.Errorf("%d records, want 2", n)
	}
}
