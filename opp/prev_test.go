package opp_test

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestPrevLinksTask: every task entry the engine writes but a create names
// the same task's previous entry (prev: index and leaf hash), whoever
// writes it, so a task's history is a chain back to its creation. A
// rebuild accepts an entry with no prev (an older provlog's) and refuses,
// as a task_prev violation, one whose prev names another entry, and a
// create that carries one as malformed.
func TestPrevLinksTask(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "alice", id))
	mustOK(t)(e.Handoff(ctx, "alice", opp.HandoffArgs{TaskID: id, To: "bob"}))
	mustOK(t)(e.Accept(ctx, "bob", id))
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "s", Source: "carol"}))
	task, err := e.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for k, ev := range task.History {
		te := readTask(t, l, ev.Index)
		switch {
		case k == 0 && te.Prev != nil:
			t.Errorf("the create at %d names a prev %+v", ev.Index, te.Prev)
		case k > 0 && (te.Prev == nil || *te.Prev != (opp.EntryRef{Index: task.History[k-1].Index, LeafHash: task.History[k-1].LeafHash})):
			t.Errorf("the %s at %d names prev %+v, want entry %d", ev.Kind, ev.Index, te.Prev, task.History[k-1].Index)
		case k > 0:
			linked++
		}
	}
	if linked != 4 {
		t.Fatalf("%d of the 4 entries after the create are linked", linked)
	}

	// An older provlog's entries name no prev; a forged one names another.
	other := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "old"})).Task.ID
	old := appendEntry(t, l, &log.TaskEntry{Kind: log.KindTaskAccept, Time: time.Now(), Actor: "alice", TaskID: other})
	es, _ := l.Entries(ctx, 0, 1)
	wrong := &log.TaskEntryRef{Index: 0, LeafHash: hex.EncodeToString(log.LeafHash(es[0]))}
	forged := appendEntry(t, l, &log.TaskEntry{Kind: log.KindTaskRelease, Time: time.Now(), Actor: "alice", TaskID: other, Prev: wrong})
	created := appendRaw(t, l, log.KindTaskCreate, "alice", map[string]any{"task_id": "t_" + strings.Repeat("ab", 16), "title": "x",
		"prev": map[string]any{"index": 1, "leaf_hash": wrong.LeafHash}})
	tasks, err := opp.Rebuild(ctx, l, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for _, v := range tasks.Violations() {
		got[v.Index] = v.Rule
	}
	if len(got) != 2 || got[forged] != opp.RulePrev || got[created] != opp.RuleEntry {
		t.Fatalf("violations %v, want %d: %s and %d: %s", tasks.Violations(), forged, opp.RulePrev, created, opp.RuleEntry)
	}
	ot, err := tasks.Task(ctx, other)
	if err != nil || ot == nil || ot.Owner != "alice" || ot.History[len(ot.History)-1].Index != old {
		t.Fatalf("the task with an unlinked accept at %d: %+v, %v", old, ot, err)
	}
	// The engine opened on that log links its next entry to the old one.
	e2 := newEngine(t, l)
	r := mustOK(t)(e2.Release(ctx, "alice", other, ""))
	if p := readTask(t, l, r.Index).Prev; p == nil || p.Index != old {
		t.Fatalf("the release after the unlinked accept at %d names prev %+v", old, p)
	}
}

func readTask(t *testing.T, l *testLog, i uint64) *log.TaskEntry {
	t.Helper()
	es, err := l.Entries(ctx, i, i+1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	te, err := log.ParseTask(e)
	if err != nil {
		t.Fatal(err)
	}
	return te
}

// TestSharedPrevLinks: on a log two sidecars share, each names as prev
// the task's previous entry whichever sidecar wrote it, and the log alone
// rebuilds with no violation.
func TestSharedPrevLinks(t *testing.T) {
	la, a, _, b := twoSidecarLogs(t, 1)
	id := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	other := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "other"})).Task.ID
	mustOK(t)(a.Accept(ctx, "alice", id))
	status(t, b, other) // B holds the other task whole, not this one
	mustOK(t)(b.Handoff(ctx, "alice", opp.HandoffArgs{TaskID: id, To: "bob"}))
	mustOK(t)(a.Accept(ctx, "bob", id))
	mustOK(t)(b.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "s", Source: "carol"}))
	tasks, err := opp.Rebuild(ctx, la, la.size())
	if err != nil {
		t.Fatal(err)
	}
	if v := tasks.Violations(); len(v) > 0 {
		t.Fatalf("the shared log rebuilds with violations: %v", v)
	}
	task, err := tasks.Task(ctx, id)
	if err != nil || task == nil {
		t.Fatalf("task %s: %v", id, err)
	}
	for k, ev := range task.History[1:] {
		es, err := la.Entries(ctx, ev.Index, ev.Index+1)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := log.ParseEntry(es[0])
		te, err := log.ParseTask(e)
		if err != nil || te.Prev == nil || te.Prev.Index != task.History[k].Index {
			t.Fatalf("the %s at %d names prev %+v (%v), want entry %d", ev.Kind, ev.Index, te.Prev, err, task.History[k].Index)
		}
	}
}
