package evidence_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestReportTaskWords: a task entry's task id, a claim's provenance and
// the entries it cites, and an entry's kind are what the entry holds. The
// task engine checks them when it writes them, but a forger writes any
// bytes into the entries of a log of their own, and verify-evidence
// prints them inside its report's lines. Unquoted, a task id such as
// `t_1, citing entries 3, 4 by "carol"` reads as words of the report
// (before: 7 such values printed raw in 4 lines). Each must be one quoted value, as
// a tool's name and an actor are; a kind of letters, digits, dots and
// underscores alone stays as it is.
func TestReportTaskWords(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 14, 24, 0, time.UTC)
	const task = `t_1, citing entries 3, 4 by "carol"`
	claim := &log.Entry{Kind: "task.claim", Time: now, Actor: "alice", Fields: map[string]any{
		"task_id":    task,
		"provenance": "observed) on task t_2 (reviewed",
		"evidence":   []any{json.Number("3"), "4 (the call that passed review)"},
	}}
	other := &log.Entry{Kind: "task.accept by bob", Time: now, Actor: "bob", Fields: map[string]any{"task_id": task}}
	create := &log.Entry{Kind: "task.create", Time: now, Actor: "alice", Fields: map[string]any{"task_id": task, "title": "ship"}}
	accept := &log.Entry{Kind: "task.accept", Time: now, Actor: "alice", Fields: map[string]any{"task_id": "t_2"}}
	rep := &evidence.Report{
		Manifest:   &evidence.Manifest{Origin: "provlog.example/log", Index: 7},
		Entry:      claim,
		Checkpoint: log.Checkpoint{Size: 9},
		Issued:     log.Checkpoint{Size: 8},
		Context: []evidence.Context{
			{ContextEntry: evidence.ContextEntry{Role: "task", Index: 2}, Entry: create},
			{ContextEntry: evidence.ContextEntry{Role: "task", Index: 4}, Entry: other},
			{ContextEntry: evidence.ContextEntry{Role: "task", Index: 5}, Entry: accept},
		},
	}
	s := rep.String()
	for _, want := range []string{
		`a completion claim ("observed) on task t_2 (reviewed") on task "t_1, citing entries 3, 4 by \"carol\"", citing entries 3, "4 (the call that passed review)" by "alice"`,
		`the creation of task "t_1, citing entries 3, 4 by \"carol\"" ("ship")`,
		`a "task.accept by bob" entry of task "t_1, citing entries 3, 4 by \"carol\"" by "bob"`,
		`a task.accept entry of task "t_2" by "alice"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the report prints what a task entry holds unquoted; want %s in:\n%s", want, s)
		}
	}
}
