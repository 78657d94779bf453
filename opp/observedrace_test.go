package opp_test

import (
	"context"
	"testing"

	"github.com/provlog/provlog/opp"
)

// raceLog is a testLog whose LatestSize, once armed, lets another writer
// (the proxy recording bob's call) commit a call entry just after the
// size was read: what a call started at the same moment as a claim does.
type raceLog struct {
	*testLog
	tb     testing.TB
	armed  bool
	called uint64
}

func (l *raceLog) LatestSize(ctx context.Context) (uint64, error) {
	n, err := l.testLog.LatestSize(ctx)
	if l.armed {
		l.armed = false
		l.called = appendCallStart(l.tb, l.testLog, "bob")
	}
	return n, err
}

// TestObservedCallCommittedDuringClaim: an observed claim citing a call
// entry committed after the engine read the log's size (followCalls) but
// before it read the cited entry (checkObserved) is judged against a call
// tracker that never saw the call, so the call counts as finished though
// it has no call.result. The claim must be refused (nothing written), as
// it is when the call entry was in the log a moment earlier, and as the
// rebuild judges the entry. Before, it was accepted and the task
// completed; the rebuild (provlog audit) then reported the claim as a
// violation, and two sidecars on one shared log disagreed on the task.
func TestObservedCallCommittedDuringClaim(t *testing.T) {
	tl := newLog(t)
	l := &raceLog{testLog: tl, tb: t}
	e, err := opp.Open(ctx, l, tl.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	next := tl.Size() // the index bob's call will get: the log's size is public
	l.armed = true
	res, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: []uint64{next}})
	if l.called != next {
		t.Fatalf("the call went to %d, want %d", l.called, next)
	}
	if err == nil {
		t.Errorf("observed claim citing call %d, which has no call.result, was accepted (entry %d, task %s)", next, res.Index, res.Task.State)
	} else if ruleOf(err) != opp.RuleEvidence {
		t.Errorf("observed claim citing call %d without a result: %v, want a refusal under %s", next, err, opp.RuleEvidence)
	}
	st := rebuildState(t, tl, tl.Size())
	if len(st.Violations) != 0 {
		t.Errorf("the rebuild from the log finds %d violations: %+v", len(st.Violations), st.Violations)
	}
}
