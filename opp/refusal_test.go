package opp_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestRefusalIsAProblem: a refusal is the one problem type every check
// reports, found through wrapping, with its rule; other errors, and other
// checks' problems, are not refusals.
func TestRefusalIsAProblem(t *testing.T) {
	err := fmt.Errorf("accept: %w", opp.Refuse(opp.RuleOwned, "task %s is owned by %s", "t_1", "bob"))
	var pe *log.ProblemsError
	if !errors.As(err, &pe) || len(pe.Problems) != 1 {
		t.Fatalf("a refusal is not a *log.ProblemsError of one problem: %#v", err)
	}
	p, ok := opp.Refusal(err)
	if !ok || p.Rule != opp.RuleOwned || p.Msg != "task t_1 is owned by bob" {
		t.Fatalf("Refusal(%v) = %+v, %v", err, p, ok)
	}
	if got, want := p.String(), "request: task t_1 is owned by bob"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, other := range []error{
		nil,
		errors.New("disk on fire"),
		&log.ProblemsError{What: "log", Problems: []log.Problem{{Part: "entry 3", Msg: "bad"}}},
	} {
		if p, ok := opp.Refusal(other); ok {
			t.Errorf("Refusal(%v) = %+v, true", other, p)
		}
	}
	v := opp.Violation{Index: 7, Kind: "task.claim", Rule: opp.RuleEvidence, Msg: "entry 9 is not below 7"}
	if got := v.Problem(); got.Rule != opp.RuleEvidence || got.String() != "entry 7 (task.claim): breaks rule evidence: entry 9 is not below 7" {
		t.Errorf("violation problem %+v: %s", got, got)
	}
}
