package evidence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestClaimWithoutItsCitedEntries: a claim's evidence directory holds
// the entries it cites (README: "for a task entry the task's history and
// the entries its claims cite"). One without them, as anyone can make by
// deleting context/<n>.* and rewriting manifest.json (which Verify
// requires to be exactly what the files give), must not verify: the
// reader would be told "OK ... citing entries N" with N, say a failed
// call, kept from them. Before, checkTask checked only that each context
// entry was cited, not that each cited entry was there (seen with provlog
// verify-evidence after removing context/14-16 of a real claim's
// evidence: OK).
func TestClaimWithoutItsCitedEntries(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
	accept := l.append("task.accept", "alice", map[string]any{"task_id": "t_1"})
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	claim := l.append("task.claim", "alice", map[string]any{"task_id": "t_1", "provenance": "reviewed", "summary": "done", "evidence": []uint64{call}})
	l.anchorNow()

	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := evidence.Write(ctx, whole, l.options(claim, create, accept, call)); err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.Verify(ctx, whole, l.vkey); err != nil {
		t.Fatalf("the whole evidence does not verify: %v", err)
	}
	cut := filepath.Join(t.TempDir(), "cut")
	if _, err := evidence.Write(ctx, cut, l.options(claim, create, accept)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cut, "context", itoa(call)+".json")); err == nil {
		t.Fatal("Write added the cited entry itself; the test is wrong")
	}
	rep, err := evidence.Verify(ctx, cut, l.vkey)
	if err == nil {
		t.Errorf("an evidence of a claim citing entry %d, without that entry, verifies:\n%s", call, rep.String())
	} else if !strings.Contains(err.Error(), itoa(call)) {
		t.Errorf("Verify: %v\nwant it to name the missing cited entry %d", err, call)
	}
}
