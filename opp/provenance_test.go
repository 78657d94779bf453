package opp_test

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/opp"
)

// pebbleOwnedByBob returns a log on real Pebble in a temp dir, an engine
// on it and a task bob owns.
func pebbleOwnedByBob(t *testing.T) (*testLog, *opp.Engine, string) {
	t.Helper()
	s, err := logpebble.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l := newLogOn(t, s)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	return l, e, id
}

// refusedClaim checks that bob's claim on task id is refused by rule,
// with an error saying want, and that it wrote nothing.
func refusedClaim(t *testing.T, l *testLog, e *opp.Engine, args opp.ClaimArgs, rule, want string) {
	t.Helper()
	before := l.Size()
	res, err := e.ReportCompletion(ctx, "bob", args)
	if ruleOf(err) != rule || !strings.Contains(err.Error(), want) {
		idx := uint64(0)
		if res != nil {
			idx = res.Index
		}
		t.Errorf("%s claim citing %v: err %v (written at %d), want a refusal of rule %s saying %q", args.Provenance, args.Evidence, err, idx, rule, want)
	}
	if n := l.Size() - before; n != 0 {
		t.Errorf("the refused %s claim citing %v wrote %d entries", args.Provenance, args.Evidence, n)
	}
}

// TestObservedNeedsEvidence: an observed claim says the claimant saw the
// work done in its own calls, so one citing no call at all is refused
// when written, and nothing is written; reviewed and reported claims may
// still cite nothing.
func TestObservedNeedsEvidence(t *testing.T) {
	l, e, id := pebbleOwnedByBob(t)
	refusedClaim(t, l, e, opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done"}, opp.RuleEvidence, "cite")
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "done"}))
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "done", Source: "carol"}))
	checkRebuild(t, l, e)
}

// TestObservedCallOneTask: calls carry no task, so one call bob made
// while he owned two tasks could stand as what he observed for both. A
// call (or its call.result, which stands for it) cited by an observed
// claim on one task is refused as evidence of an observed claim on
// another when written, naming the task it is evidence for; nothing is
// written. Citing it again on the same task, or by a reviewed claim
// elsewhere, is still accepted.
func TestObservedCallOneTask(t *testing.T) {
	l, e, one := pebbleOwnedByBob(t)
	two := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", two))
	call := appendCallStart(t, l, "bob")
	result := appendCallResult(t, l, "bob", call)
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "done", Evidence: []uint64{call}}))
	for _, ev := range []uint64{call, result} {
		refusedClaim(t, l, e, opp.ClaimArgs{TaskID: two, Provenance: "observed", Summary: "done", Evidence: []uint64{ev}}, opp.RuleEvidence, one)
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "again", Evidence: []uint64{result}}))
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: two, Provenance: "reviewed", Summary: "checked", Evidence: []uint64{call}}))
	checkRebuild(t, l, e)
}

// TestObservedCallOneTaskSnapshot: which task a cited call backs is saved
// with the task index, so an engine resumed from it, replaying nothing,
// still refuses the call as observed evidence for another task.
func TestObservedCallOneTaskSnapshot(t *testing.T) {
	l, e, one := pebbleOwnedByBob(t)
	two := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", two))
	call := appendCallStart(t, l, "bob")
	appendCallResult(t, l, "bob", call)
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "done", Evidence: []uint64{call}}))
	path := filepath.Join(t.TempDir(), "tasks.idx")
	e1, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.SaveIndex(ctx, l.Size()); err != nil {
		t.Fatal(err)
	}
	e2, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if from, err := e2.Resumed(); from != l.Size() || err != nil {
		t.Fatalf("Resumed: %d, %v; want %d, nil", from, err, l.Size())
	}
	refusedClaim(t, l, e2, opp.ClaimArgs{TaskID: two, Provenance: "observed", Summary: "done", Evidence: []uint64{call}}, opp.RuleEvidence, one)
	mustOK(t)(e2.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "again", Evidence: []uint64{call}}))
	checkRebuild(t, l, e2)
}

// TestObservedNeedsSuccess: a failed call (a call.result with is_error,
// or with an error and no result) shows the claimant saw the work fail,
// not done, so an observed claim citing only failed calls, by their call
// or call.result entries, is refused when written, and nothing is
// written. Cited beside a call that succeeded (the failing run before the
// fix), a failed call is accepted; a reviewed claim may cite it alone.
func TestObservedNeedsSuccess(t *testing.T) {
	l, e, id := pebbleOwnedByBob(t)
	isError := appendCallStart(t, l, "bob")
	isErrorResult := appendEntry(t, l, &log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: isError, IsError: true, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
	broken := appendCallStart(t, l, "bob")
	brokenResult := appendEntry(t, l, &log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: broken, Error: "connection reset", ErrorCode: -32603})
	// A call of an old log holds its outcome.
	inline := appendRaw(t, l, log.KindCall, "bob", map[string]any{"server": "everything", "tool": "echo", "args": map[string]any{}, "is_error": true})
	failedOnes := [][]uint64{{isError}, {isErrorResult}, {broken}, {brokenResult}, {isError, brokenResult}, {inline}}
	for _, ev := range failedOnes {
		refusedClaim(t, l, e, opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: ev}, opp.RuleEvidence, "failed")
	}
	// The failed calls are saved with the task index: an engine resumed
	// from it, replaying nothing, refuses them too.
	path := filepath.Join(t.TempDir(), "tasks.idx")
	e1, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.SaveIndex(ctx, l.Size()); err != nil {
		t.Fatal(err)
	}
	e2, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if from, err := e2.Resumed(); from != l.Size() || err != nil {
		t.Fatalf("Resumed: %d, %v; want %d, nil", from, err, l.Size())
	}
	for _, ev := range failedOnes {
		refusedClaim(t, l, e2, opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: ev}, opp.RuleEvidence, "failed")
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "it failed", Evidence: []uint64{isError}}))
	ok := appendCallStart(t, l, "bob")
	appendCallResult(t, l, "bob", ok)
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "fixed", Evidence: []uint64{isError, inline, ok}}))
	checkRebuild(t, l, e)
}

// TestObservedOldLog: the three rules above are checked when a claim is
// written, so a log an older provlog wrote with such claims (one citing
// nothing, one citing only a failed call, and one call backing observed
// claims on two tasks) rebuilds as it did: every claim applied, no
// violation, the tasks completed; an engine opened on it holds the same
// state, from the log and from a saved index, and takes no new claim on a
// call backing two tasks.
func TestObservedOldLog(t *testing.T) {
	l, e, one := pebbleOwnedByBob(t)
	two := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
	three := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "three"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", two))
	mustOK(t)(e.Accept(ctx, "bob", three))
	call := appendCallStart(t, l, "bob")
	appendCallResult(t, l, "bob", call)
	failed := appendCallStart(t, l, "bob")
	appendEntry(t, l, &log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: failed, IsError: true, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
	claim := func(id string, ev ...uint64) map[string]any {
		f := map[string]any{"task_id": id, "provenance": "observed", "summary": "done"}
		if len(ev) > 0 {
			f["evidence"] = ev
		}
		return f
	}
	appendRaw(t, l, opp.KindClaim, "bob", claim(one))
	appendRaw(t, l, opp.KindClaim, "bob", claim(two, failed))
	appendRaw(t, l, opp.KindClaim, "bob", claim(three, call))
	appendRaw(t, l, opp.KindClaim, "bob", claim(one, call))
	st := rebuildState(t, l, l.Size())
	if len(st.Violations) != 0 {
		t.Fatalf("violations %v, want none: the rules are checked when written", st.Violations)
	}
	for _, id := range []string{one, two, three} {
		if tk := st.Task(id); tk == nil || tk.State != opp.StateCompleted {
			t.Fatalf("task %s rebuilt as %+v, want completed", id, tk)
		}
	}
	if d := diffStates(mustState(t, newEngine(t, l)), st); len(d) > 0 {
		t.Fatalf("an engine opened on the old log differs from its rebuild: %v", d)
	}
	path := filepath.Join(t.TempDir(), "tasks.idx")
	e1, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.SaveIndex(ctx, l.Size()); err != nil {
		t.Fatal(err)
	}
	e2, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if from, err := e2.Resumed(); from != l.Size() || err != nil {
		t.Fatalf("Resumed: %d, %v; want %d, nil", from, err, l.Size())
	}
	if d := diffStates(mustState(t, e2), st); len(d) > 0 {
		t.Fatalf("an engine resumed from a saved index differs from the rebuild: %v", d)
	}
	// The call backs two tasks: it is evidence for neither now.
	refusedClaim(t, l, e2, opp.ClaimArgs{TaskID: one, Provenance: "observed", Summary: "again", Evidence: []uint64{call}}, opp.RuleEvidence, "more than one other task")
}

// TestObservedCallOneTaskRace: eight observed claims on eight tasks bob
// owns, citing one call at once, run in parallel (each under its own
// task's lock): exactly one is written, the others refused naming its
// task.
func TestObservedCallOneTaskRace(t *testing.T) {
	l, e, first := pebbleOwnedByBob(t)
	ids := []string{first}
	for range 7 {
		id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
		mustOK(t)(e.Accept(ctx, "bob", id))
		ids = append(ids, id)
	}
	call := appendCallStart(t, l, "bob")
	appendCallResult(t, l, "bob", call)
	before := l.Size()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for k, id := range ids {
		wg.Go(func() {
			_, errs[k] = e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: []uint64{call}})
		})
	}
	wg.Wait()
	won := -1
	for k, err := range errs {
		switch {
		case err == nil && won < 0:
			won = k
		case err == nil:
			t.Errorf("claims on %s and %s both written", ids[won], ids[k])
		case ruleOf(err) != opp.RuleEvidence:
			t.Errorf("claim on %s: %v, want rule %s", ids[k], err, opp.RuleEvidence)
		}
	}
	if won < 0 {
		t.Fatal("no claim written")
	}
	for k, err := range errs {
		if k != won && err != nil && !strings.Contains(err.Error(), ids[won]) {
			t.Errorf("claim on %s refused with %v, not naming %s", ids[k], err, ids[won])
		}
	}
	if n := l.Size() - before; n != 1 {
		t.Errorf("%d entries written, want 1", n)
	}
	checkRebuild(t, l, e)
}
