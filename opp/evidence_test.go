package opp_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/opp"
)

// TestCitedResultSameCall: the two rules that look through a cited
// call.result to its call, the observed claim's and the upgrade's, see
// the same call for the same result: the call it names when that lies
// before it, and no call (the result stands for itself) when it names a
// later entry. Task a is judged by the observed rule alone (bob's first
// claims on it), task b by the upgrade rule alone (reported and reviewed
// claims, which the observed rule does not look at).
func TestCitedResultSameCall(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	a := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "a"})).Task.ID
	b := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "b"})).Task.ID
	early := appendCallStart(t, l, "bob") // before bob owns either task
	mustOK(t)(e.Accept(ctx, "bob", a))
	mustOK(t)(e.Accept(ctx, "bob", b))
	earlyResult := appendCallResult(t, l, "bob", early)
	call := appendCallStart(t, l, "bob")
	result := appendCallResult(t, l, "bob", call)
	// A call.result naming the entry after it, a call of bob's.
	forged := appendCallResult(t, l, "bob", l.Size()+1)
	if later := appendCallStart(t, l, "bob"); later != forged+1 {
		t.Fatalf("the call after the forged result is entry %d, not %d", later, forged+1)
	}

	// The observed rule: earlyResult is early, made before the accept;
	// forged stands for no call; result is call, made while bob owned a.
	for _, c := range []struct {
		ev   uint64
		want string
	}{
		{earlyResult, fmt.Sprintf("is a call you made (entry %d) while you did not own task", early)},
		{forged, "is a call.result that does not name an earlier call"},
	} {
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: a, Provenance: "observed", Summary: "s", Evidence: []uint64{c.ev}})
		if ruleOf(err) != opp.RuleEvidence || !strings.Contains(err.Error(), c.want) {
			t.Errorf("observed claim citing entry %d: %v, want a refusal saying %q", c.ev, err, c.want)
		}
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: a, Provenance: "observed", Summary: "s", Evidence: []uint64{result}}))

	// The upgrade rule, after a reported claim citing the calls: a result
	// of a call cited before is nothing new, wherever the call lies;
	// forged is new, as it stands for no call, not for the call after it.
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: b, Provenance: "reported", Summary: "s", Source: "carol", Evidence: []uint64{early, call, forged + 1}}))
	for _, ev := range []uint64{earlyResult, result} {
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: b, Provenance: "reviewed", Summary: "s", Evidence: []uint64{ev}})
		if ruleOf(err) != opp.RuleUpgrade {
			t.Errorf("reviewed claim citing entry %d, the result of a call cited before: %v", ev, err)
		}
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: b, Provenance: "reviewed", Summary: "s", Evidence: []uint64{forged}}))
	checkRebuild(t, l, e)
}

// TestUpgradeOnOwnRecords: a claim more certain than the actor's last
// one cannot rest on the record of claims: its own earlier claim, the
// task's own entries or its own entries of another task are not new
// evidence, live or in a rebuild of a log an older provlog wrote.
// Another actor's call is.
func TestUpgradeOnOwnRecords(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	created := l.Size() - 1
	accepted := mustOK(t)(e.Accept(ctx, "bob", id)).Index
	other := mustOK(t)(e.Create(ctx, "bob", opp.CreateArgs{Title: "other"})).Index
	carolCall := appendCallStart(t, l, "carol")
	claim := mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: "s", Source: "carol"})).Index
	for _, ev := range []uint64{claim, created, accepted, other} {
		before := l.Size()
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "s", Evidence: []uint64{ev}})
		if ruleOf(err) != opp.RuleUpgrade || l.Size() != before {
			t.Errorf("reviewed claim resting on entry %d, a record of claims: %v (log %d -> %d)", ev, err, before, l.Size())
		}
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "s", Evidence: []uint64{claim, carolCall}}))

	// Such an upgrade written straight into the log is a violation.
	id2 := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t2"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id2))
	claim2 := mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id2, Provenance: "reported", Summary: "s", Source: "carol"})).Index
	live := checkRebuild(t, l, e)
	appendRaw(t, l, opp.KindClaim, "bob", map[string]any{"task_id": id2, "provenance": "reviewed", "summary": "s", "evidence": []uint64{claim2}})
	st := rebuildState(t, l, l.Size())
	if len(st.Violations) != 1 || st.Violations[0].Rule != opp.RuleUpgrade {
		t.Fatalf("violations %v, want one of rule %s", st.Violations, opp.RuleUpgrade)
	}
	st.Violations = nil
	if d := diffStates(live, st); len(d) > 0 {
		t.Fatalf("the refused upgrade changed the state: %v", d)
	}
}

// countingLog counts the single entries read from a log, as the rules
// read cited evidence (reads), and those read in ranges, as the engine
// follows the log (ranged).
type countingLog struct {
	*testLog
	reads, ranged atomic.Int64
}

func (c *countingLog) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	if end == start+1 {
		c.reads.Add(1)
	} else if end > start {
		c.ranged.Add(int64(end - start))
	}
	return c.testLog.Entries(ctx, start, end)
}

// countedTask returns a counting log, an engine on it and a task bob owns.
func countedTask(t *testing.T) (*countingLog, *opp.Engine, string) {
	c := &countingLog{testLog: newLog(t)}
	e, err := opp.Open(ctx, c, c.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	return c, e, id
}

// TestUpgradeReadsBounded: a claim more certain than the actor's last
// one reads a bounded number of entries however much the actor cited on
// the task before: each cited entry's call is read once per task, not
// again at every upgrade (100 claims of 64 citations each, alternating
// reported and reviewed, read 323,000 entries, quadratic in the claims).
func TestUpgradeReadsBounded(t *testing.T) {
	c, e, id := countedTask(t)
	var calls []uint64
	for range opp.MaxClaims * opp.MaxEvidence {
		calls = append(calls, appendCallStart(t, c.testLog, "bob"))
	}
	c.reads.Store(0)
	for k := range opp.MaxClaims {
		prov := []string{"reported", "reviewed"}[k%2]
		ev := calls[k*opp.MaxEvidence : (k+1)*opp.MaxEvidence]
		mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: prov, Summary: "s", Source: "carol", Evidence: ev}))
	}
	// Each claim reads its citations to see that they exist, and each
	// upgrade reads them again to find their calls (at most 3 × 64);
	// every cited entry is mapped to its call once more, when first
	// needed.
	bound := int64(opp.MaxClaims*3*opp.MaxEvidence + len(calls))
	if got := c.reads.Load(); got > bound {
		t.Fatalf("%d claims read %d entries, over %d", opp.MaxClaims, got, bound)
	}
	t.Logf("%d claims read %d entries", opp.MaxClaims, c.reads.Load())
	checkRebuild(t, c.testLog, e)
}
