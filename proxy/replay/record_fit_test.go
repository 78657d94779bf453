package replay

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// TestFitDefinitions: a replay entry whose changed definitions alone are
// too large for the log keeps its counts and pins them by their hash, as
// it pins the per-call outcomes.
func TestFitDefinitions(t *testing.T) {
	rep := &Report{From: 0, To: 2000, Runs: 1, Counts: map[string]int{Unchanged: 2000}, Definitions: map[string]int{DefinitionChanged: 2000}}
	for i := range 2000 {
		rep.Outcomes = append(rep.Outcomes, Outcome{Index: uint64(i), Server: "fx", Tool: fmt.Sprintf("tool%d", i), Class: Unchanged,
			Definition: DefinitionChanged, ToolThen: strings.Repeat("a", 64), ToolNow: strings.Repeat("b", 64)})
	}
	r := rep.Record("local", time.Unix(1, 0), nil)
	changes, err := SumJCS(r.DefinitionChanges)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Fit(); !reflect.DeepEqual(got, []string{"outcomes", "definition_changes"}) {
		t.Errorf("Fit replaced %v, want outcomes, then definition_changes", got)
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatalf("the fitted entry: %v", err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRecord(e)
	if err != nil {
		t.Fatalf("the fitted entry does not parse: %v", err)
	}
	if got.DefinitionChangesSHA256 != changes || got.DefinitionChanges != nil || got.OutcomesSHA256 == "" || got.Definitions == nil || got.Counts[Unchanged] != 2000 {
		t.Errorf("fitted record %+v, want the counts and definition_changes_sha256 %s", got, changes)
	}
}
