package opp_test

import (
	"fmt"
	"strings"
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
