package opp_test

import (
	"context"
	"sync"
	"testing"

	"github.com/provlog/provlog/opp"
)

// TestSharedObservedCallOneTaskRace: two sidecars on one PostgreSQL log,
// bob owning a task through each, claim both tasks at the same moment as
// observed, citing one call. Round after round, exactly one claim is
// written and the other is refused by the evidence rule; the log alone
// rebuilds what each sidecar holds.
func TestSharedObservedCallOneTaskRace(t *testing.T) {
	ctx := context.Background()
	la, a, _, b := twoSidecarLogs(t, 0)
	const rounds = 30
	both := 0
	for round := range rounds {
		one := mustOK(t)(a.Create(ctx, "alice", opp.CreateArgs{Title: "one"})).Task.ID
		two := mustOK(t)(b.Create(ctx, "alice", opp.CreateArgs{Title: "two"})).Task.ID
		mustOK(t)(a.Accept(ctx, "bob", one))
		mustOK(t)(b.Accept(ctx, "bob", two))
		call := appendCallStart(t, la, "bob")
		appendCallResult(t, la, "bob", call)
		engines, ids := []*opp.Engine{a, b}, []string{one, two}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range engines {
			wg.Go(func() {
				<-start
				_, errs[k] = engines[k].ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: ids[k], Provenance: "observed", Summary: "done", Evidence: []uint64{call}})
			})
		}
		close(start)
		wg.Wait()
		switch {
		case errs[0] == nil && errs[1] == nil:
			both++
		case errs[0] != nil && errs[1] != nil:
			t.Errorf("round %d: both claims refused: %v; %v", round, errs[0], errs[1])
		default:
			for k, err := range errs {
				if err != nil && ruleOf(err) != opp.RuleEvidence {
					t.Errorf("round %d: claim through sidecar %d: %v, want rule %s", round, k, err, opp.RuleEvidence)
				}
			}
		}
	}
	if both > 0 {
		t.Errorf("in %d of %d rounds, claims on two tasks citing one call were both written", both, rounds)
	}
	checkSharedRebuild(t, la, a, b)
}
