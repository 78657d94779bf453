package evidence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestReportStringEscapes: the evidence report quotes what the entry and
// the directory hold (a server's tool name, an actor, the origin, a
// context entry, the manifest's missing lines, Rekor URLs, witness
// names), which a hostile agent, server or forger wrote. Printed by
// `provlog evidence` and `provlog verify-evidence`, none of it may act on
// the auditor's terminal: each line holds no control character and no
// line of its own starts with "OK".
func TestReportStringEscapes(t *testing.T) {
	const esc = "\x1b]0;evidence verified\x07\x1b[2K\r\nOK: fake\u202e"
	now := time.Now()
	call := &log.Entry{Kind: log.KindCall, Time: now, Actor: "agent" + esc, Fields: map[string]any{"server": "fx" + esc, "tool": "lookup" + esc}}
	task := &log.Entry{Kind: "task.create", Time: now, Actor: "alice", Fields: map[string]any{"task_id": "t" + esc, "title": "ship"}}
	rep := &evidence.Report{
		Manifest:   &evidence.Manifest{Origin: "provlog.example/log" + esc, Index: 7, Missing: []string{"an anchor" + esc}},
		Entry:      call,
		Checkpoint: log.Checkpoint{Size: 9},
		Issued:     log.Checkpoint{Size: 8},
		Witnesses:  1, Threshold: 1, Cosigners: []string{"w" + esc},
		Rekor:   []evidence.RekorEntry{{URL: "https://rekor.example/" + esc, Index: 3, IntegratedTime: now}},
		Context: []evidence.Context{{ContextEntry: evidence.ContextEntry{Role: "task", Index: 2}, Entry: task}},
	}
	s := rep.String()
	for _, want := range []string{"lookup", "missing: an anchor", "rekor.example", `task "t`} {
		if !strings.Contains(s, want) {
			t.Errorf("report does not say %q:\n%s", want, s)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if strings.HasPrefix(l, "OK") || strings.ContainsFunc(l, func(r rune) bool { return log.Invisible(r) != "" }) {
			t.Errorf("report line holds what the evidence wrote raw: %q", l)
		}
	}
}
