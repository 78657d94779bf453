package opp_test

import (
	"context"
	"slices"
	"testing"

	"github.com/provlog/provlog/opp"
)

// heldLog reads the entries of l at the indices held, every other one
// as {}, as provlog view reads an evidence, and counts the entries read.
type heldLog struct {
	l    *testLog
	held []uint64 // ascending
	read int
}

func (h *heldLog) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	var out [][]byte
	for i := start; i < end; i++ {
		h.read++
		if _, ok := slices.BinarySearch(h.held, i); !ok {
			out = append(out, []byte("{}"))
			continue
		}
		es, err := h.l.Entries(ctx, i, i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, es[0])
	}
	return out, nil
}

// sparseLog is a heldLog that says which entries it holds.
type sparseLog struct{ *heldLog }

func (s sparseLog) Held(i uint64) (uint64, bool) {
	k, _ := slices.BinarySearch(s.held, i)
	if k == len(s.held) {
		return 0, false
	}
	return s.held[k], true
}

// TestRebuildSparse: a rebuild of an opp.SparseReader reads the entries
// it holds (and what their rules read), not the {} between them, and
// derives the state a rebuild of every index derives: a task whose
// observed claim cites a call and its result 1,500 entries of another
// actor's calls apart, none of them held.
func TestRebuildSparse(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	held := []uint64{0}
	task := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "a"})).Task.ID
	held = append(held, l.Size()-1)
	mustOK(t)(e.Accept(ctx, "bob", task))
	held = append(held, l.Size()-1)
	call := appendCallStart(t, l, "bob")
	for range 1500 {
		appendCall(t, l, "carol")
	}
	result := appendCallResult(t, l, "bob", call)
	for range 1500 {
		appendCall(t, l, "carol")
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: task, Provenance: "observed", Summary: "s", Evidence: []uint64{result}}))
	held = append(held, call, result, l.Size()-1)
	slices.Sort(held)

	dense := &heldLog{l: l, held: held}
	want := rebuildState(t, dense, l.Size())
	sparse := sparseLog{&heldLog{l: l, held: held}}
	got := rebuildState(t, sparse, l.Size())
	if d := diffStates(want, got); len(d) > 0 {
		t.Fatalf("the sparse rebuild differs from the dense one:\n%v", d)
	}
	if len(got.Tasks) != 1 || got.Tasks[0].State != opp.StateCompleted || len(got.Violations) != 0 {
		t.Errorf("rebuilt %+v; want the task completed by its observed claim", got)
	}
	// The held entries, the claim's citation and the task read back.
	if sparse.read > 3*len(held) || dense.read < int(l.Size()) {
		t.Errorf("the sparse rebuild read %d entries, the dense one %d, of %d held in %d", sparse.read, dense.read, len(held), l.Size())
	}
	t.Logf("entries read: sparse %d, dense %d; %d held of %d", sparse.read, dense.read, len(held), l.Size())
}
