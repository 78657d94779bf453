package opp_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// refusedNoResult checks that an observed claim by bob on task id citing
// ev is refused as citing call, which has no call.result, and writes
// nothing.
func refusedNoResult(t *testing.T, l *testLog, e *opp.Engine, id string, call uint64, ev ...uint64) {
	t.Helper()
	before := l.Size()
	_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: ev})
	want := fmt.Sprintf("your call %d, which has no call.result in the log before this claim", call)
	if ruleOf(err) != opp.RuleEvidence || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "claim provenance reviewed or reported") {
		t.Errorf("observed claim citing %v: %v, want a refusal saying %q", ev, err, want)
	}
	if l.Size() != before {
		t.Errorf("the refused claim citing %v wrote %d entries", ev, l.Size()-before)
	}
}

// ownedByBob returns a new log, an engine on it and a task bob owns.
func ownedByBob(t *testing.T) (*testLog, *opp.Engine, string) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	return l, e, id
}

// TestObservedNeedsResult: an observed claim may cite a call only once
// the call's call.result is in the log: the agent cannot have seen the
// outcome of a call still running or cut off. Citing the call or its
// result is then accepted, and so is a call that failed (it has its
// result), beside one that succeeded (TestObservedNeedsSuccess). A
// reviewed claim may still cite a call without a result.
func TestObservedNeedsResult(t *testing.T) {
	l, e, id := ownedByBob(t)
	running := appendCallStart(t, l, "bob")
	refusedNoResult(t, l, e, id, running, running)
	done := appendCallStart(t, l, "bob")
	doneResult := appendCallResult(t, l, "bob", done)
	refusedNoResult(t, l, e, id, running, doneResult, running)
	cutOff := appendCallStart(t, l, "bob")
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "s", Evidence: []uint64{cutOff}}))

	// The result arrives: the call may now be cited, or its result.
	appendCallResult(t, l, "bob", running)
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{running}}))
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{doneResult}}))
	failed := appendCallStart(t, l, "bob")
	appendEntry(t, l, &log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: failed, IsError: true, Error: "boom", ErrorCode: -32000})
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "it failed, then worked", Evidence: []uint64{failed, doneResult}}))

	// A result by another actor is not the call's: it stays without one.
	forged := appendCallStart(t, l, "bob")
	forgedResult := appendCallResult(t, l, "carol", forged)
	refusedNoResult(t, l, e, id, forged, forged)
	refusedNoResult(t, l, e, id, forged, forgedResult)
	checkRebuild(t, l, e)
}

// TestObservedResultAfterClaim: an observed claim written into the log
// before its call's result, as an older provlog accepted it, is a
// violation in a rebuild, at the start of an engine and in an audit's
// rebuild; it changes nothing, and the result that came after it does not
// make it good.
func TestObservedResultAfterClaim(t *testing.T) {
	l, e, id := ownedByBob(t)
	call := appendCallStart(t, l, "bob")
	live := checkRebuild(t, l, e)
	claim := appendRaw(t, l, opp.KindClaim, "bob", map[string]any{"task_id": id, "provenance": "observed", "summary": "s", "evidence": []uint64{call}})
	appendCallResult(t, l, "bob", call)
	st := rebuildState(t, l, l.Size())
	if len(st.Violations) != 1 || st.Violations[0].Index != claim || st.Violations[0].Rule != opp.RuleEvidence ||
		!strings.Contains(st.Violations[0].Msg, fmt.Sprintf("call %d, which has no call.result", call)) {
		t.Fatalf("violations %v, want one of rule %s at %d", st.Violations, opp.RuleEvidence, claim)
	}
	st.Violations = nil
	if d := diffStates(live, st); len(d) > 0 {
		t.Fatalf("the claim made before its call's result changed the state: %v", d)
	}
	e2 := newEngine(t, l)
	if v := e2.Violations(); len(v) != 1 || v[0].Index != claim {
		t.Fatalf("engine opened on the log: violations %v, want the claim at %d", v, claim)
	}
	// Now the result is in the log, the same claim is accepted.
	mustOK(t)(e2.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{call}}))
	checkRebuild(t, l, e2)
}

// TestObservedResultSnapshot: the calls without a result are saved with
// the task index, so an engine resumed from it still refuses a call that
// had none when it was saved, and accepts one that had.
func TestObservedResultSnapshot(t *testing.T) {
	l := newLog(t)
	path := filepath.Join(t.TempDir(), "tasks.idx")
	e, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	running, done := appendCallStart(t, l, "bob"), appendCallStart(t, l, "bob")
	appendCallResult(t, l, "bob", done)
	if err := e.SaveIndex(ctx, l.Size()); err != nil {
		t.Fatal(err)
	}
	e2, err := opp.Open(ctx, l, l.Size(), &opp.Options{IndexFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if from, err := e2.Resumed(); from != l.Size() || err != nil {
		t.Fatalf("Resumed: %d, %v; want %d, nil", from, err, l.Size())
	}
	refusedNoResult(t, l, e2, id, running, running)
	mustOK(t)(e2.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{done}}))
	appendCallResult(t, l, "bob", running)
	mustOK(t)(e2.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{running}}))
	checkRebuild(t, l, e2)
}

// TestObservedReadsBounded: finding whether a cited call has its result
// reads nothing per citation beyond what a claim read before (the cited
// entry, and a cited result's call); the engine reads each entry
// appended since it last looked once, in ranges, however many claims cite
// the calls among them.
func TestObservedReadsBounded(t *testing.T) {
	c, e, id := countedTask(t)
	const claims = 20
	var calls, results []uint64
	for range claims * opp.MaxEvidence {
		calls = append(calls, appendCallStart(t, c.testLog, "bob"))
	}
	for _, k := range calls {
		results = append(results, appendCallResult(t, c.testLog, "bob", k))
	}
	appended := c.Size()
	c.reads.Store(0)
	c.ranged.Store(0)
	for k := range claims {
		ev := calls[k*opp.MaxEvidence : (k+1)*opp.MaxEvidence]
		if k%2 == 1 {
			ev = results[k*opp.MaxEvidence : (k+1)*opp.MaxEvidence]
		}
		mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: ev}))
	}
	// A citation reads itself and, for a result, its call; and a claim
	// follows the one entry the claim before it wrote (a range of one).
	bound := int64(claims/2*3*opp.MaxEvidence + claims)
	if got := c.reads.Load(); got > bound {
		t.Fatalf("%d observed claims of %d citations read %d single entries, over %d", claims, opp.MaxEvidence, got, bound)
	}
	// Each entry is followed once: those before the claims, and the claims.
	if got, max := c.ranged.Load(), int64(appended)+claims; got > max {
		t.Fatalf("the engine followed %d entries of a log of %d (and %d claims)", got, appended, claims)
	}
	t.Logf("%d observed claims of %d citations each: %d single reads, %d entries followed in ranges (log of %d)", claims, opp.MaxEvidence, c.reads.Load(), c.ranged.Load(), c.Size())
	checkRebuild(t, c.testLog, e)
}
