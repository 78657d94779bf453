package opp_test

import (
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestRebuildTasks: Rebuild holds the tasks one at a time: Task reads
// each back as All yields it, in order of creation.
func TestRebuildTasks(t *testing.T) {
	f := newFixture(t)
	st := checkRebuild(t, f.l, f.e)
	tasks, err := opp.Rebuild(ctx, f.l, f.l.Size())
	if err != nil {
		t.Fatal(err)
	}
	if tasks.Len() != len(st.Tasks) || len(tasks.Violations()) != len(st.Violations) {
		t.Fatalf("Rebuild: %d tasks, %d violations; collected: %d, %d", tasks.Len(), len(tasks.Violations()), len(st.Tasks), len(st.Violations))
	}
	for i, want := range st.Tasks {
		if i > 0 && want.CreatedIndex <= st.Tasks[i-1].CreatedIndex {
			t.Fatalf("All yielded task %s (created at %d) after one created at %d", want.ID, want.CreatedIndex, st.Tasks[i-1].CreatedIndex)
		}
		got, err := tasks.Task(ctx, want.ID)
		if err != nil || got == nil {
			t.Fatalf("task %s: %v, %v", want.ID, got, err)
		}
		if diffStates(&state{Tasks: []opp.Task{*got}}, &state{Tasks: []opp.Task{want}}) != nil {
			t.Fatalf("task %s: Task %+v, All %+v", want.ID, got, want)
		}
	}
	if got, err := tasks.Task(ctx, "t_00000000000000000000000000000000"); got != nil || err != nil {
		t.Fatalf("unknown task: %v, %v", got, err)
	}
	// Stopping early stops reading.
	n := 0
	for range tasks.All(ctx) {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("All yielded %d before the break", n)
	}
}

func TestOpenRebuildsState(t *testing.T) {
	f := newFixture(t)
	mustOK(t)(f.e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "observed", Summary: "s", Evidence: []uint64{f.bobCallDuring}}))
	e2, err := opp.Open(ctx, f.l, f.l.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffStates(mustState(t, f.e), mustState(t, e2)); len(d) > 0 {
		t.Fatalf("reopened engine differs: %v", d)
	}
	// The reopened engine enforces the same rules on the rebuilt state.
	if _, err := e2.Accept(ctx, "carol", f.completed); ruleOf(err) != opp.RuleFinished {
		t.Fatalf("accept completed after reopen: %v", err)
	}
	mustOK(t)(e2.Accept(ctx, "carol", f.handed))
	checkRebuild(t, f.l, e2)
}

// TestRebuildViolations writes task entries the engine would refuse
// straight into the log: each is reported, none changes the state, and
// Open still works.
func TestRebuildViolations(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t", OfferTo: "carol"})).Task.ID
	other := "t_" + strings.Repeat("ab", 16)
	bad := []struct {
		kind, actor string
		fields      map[string]any
		rule        string
	}{
		{opp.KindAccept, "bob", map[string]any{"task_id": id}, opp.RuleReserved},
		{opp.KindAccept, "bob", map[string]any{"task_id": other}, opp.RuleUnknownTask},
		{opp.KindClaim, "carol", map[string]any{"task_id": id, "provenance": "observed", "summary": "s"}, opp.RuleNotOwner},
		{opp.KindClaim, "carol", map[string]any{"task_id": id, "provenance": []string{"observed"}, "summary": "s"}, opp.RuleEntry},
		{opp.KindAccept, "carol", map[string]any{"task_id": id, "extra": 1}, opp.RuleEntry},
		{opp.KindCreate, "alice", map[string]any{"task_id": id, "title": "dup"}, opp.RuleEntry},
		{"task.frobnicate", "alice", map[string]any{"task_id": id}, opp.RuleEntry},
		{opp.KindHandoff, "alice", map[string]any{"task_id": id, "to": "bob"}, opp.RuleSnapshot},
	}
	before := mustState(t, e)
	for _, b := range bad {
		appendRaw(t, l, b.kind, b.actor, b.fields)
	}
	// A call whose arguments merely look like a task entry is skipped.
	appendRaw(t, l, log.KindCall, "bob", map[string]any{"args": map[string]any{"kind": "task.accept", "task_id": id}})
	st := rebuildState(t, l, l.Size())
	if len(st.Violations) != len(bad) {
		t.Fatalf("%d violations, want %d: %v", len(st.Violations), len(bad), st.Violations)
	}
	for i, v := range st.Violations {
		if v.Rule != bad[i].rule {
			t.Errorf("violation %d: %s, want rule %s", i, v, bad[i].rule)
		}
	}
	st.Violations = nil
	if d := diffStates(before, st); len(d) > 0 {
		t.Fatalf("rule-breaking entries changed the state: %v", d)
	}
	e2, err := opp.Open(ctx, l, l.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e2.Violations()); got != len(bad) {
		t.Fatalf("Open found %d violations, want %d", got, len(bad))
	}
	mustOK(t)(e2.Accept(ctx, "carol", id))
}

// TestRebuildChunks rebuilds across the chunk boundary, with an observed
// claim citing a call far from its task entries.
func TestRebuildChunks(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "long"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	var last uint64
	for i := range 1500 {
		last = appendCall(t, l, []string{"bob", "carol"}[i%2])
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{last - 1}}))
	st := checkRebuild(t, l, e)
	if got := st.Task(id); got == nil || got.State != opp.StateCompleted || len(got.History) != 3 {
		t.Fatalf("rebuilt task: %+v", got)
	}
}
