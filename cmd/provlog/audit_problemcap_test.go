package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// TestAuditTaskProblemsBounded: a log of 150 task entries that break the
// rules (bob accepts a task offered to carol) fails audit, which prints
// the first 100 and how many more there were, not a line each; verify-bundle
// of its bundle says the same.
func TestAuditTaskProblemsBounded(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 2)
	const n = 150
	appendToDataDir(t, data, func(l appendLog) {
		size, _ := l.LatestSize(ctx)
		eng, err := opp.Open(ctx, l, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := eng.Create(ctx, "alice", opp.CreateArgs{Title: "t", OfferTo: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			appendEntryTo(t, l, &log.Entry{Kind: opp.KindAccept, Time: time.Now(), Actor: "bob", Fields: map[string]any{"task_id": res.Task.ID}})
		}
	})
	out, code := runCmd(t, "audit", "--data", data)
	lines := strings.Count(out, "breaks rule")
	if code != 1 || lines == 0 || lines > 100 || !strings.Contains(out, "and 50 more") {
		t.Errorf("audit of %d broken task entries: exit %d, %d lines name a rule (%d bytes), want 1, at most 100 and \"and 50 more\"\n%.3000s", n, code, lines, len(out), out)
	}
	out, code = runCmd(t, "verify-bundle", exportBundle(t, data, ""))
	lines = strings.Count(out, "breaks rule")
	if code != 1 || lines == 0 || lines > 100 || !strings.Contains(out, "and 50 more") {
		t.Errorf("verify-bundle of %d broken task entries: exit %d, %d lines name a rule, want 1, at most 100 and \"and 50 more\"\n%.3000s", n, code, lines, out)
	}
}
