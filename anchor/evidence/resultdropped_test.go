package evidence_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestObservedClaimWithoutCallResult: an observed claim cites a call,
// which the rules admit only once its call.result is in the log before
// the claim; here that result says the call failed. provlog evidence
// puts the result in the claim's evidence with the call. A forger writes
// the same evidence without context/<result>.* (any file list with its
// manifest rewritten): Verify must refuse it, naming the call whose
// outcome it holds back, else "OK ... citing entries N" shows the call
// and hides that it failed.
func TestObservedClaimWithoutCallResult(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
	accept := l.append("task.accept", "alice", map[string]any{"task_id": "t_1"})
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	result := l.append(log.KindCallResult, "alice", map[string]any{"call": call, "is_error": true, "duration_ns": 1000})
	claim := l.append("task.claim", "alice", map[string]any{"task_id": "t_1", "provenance": "observed", "summary": "done", "evidence": []uint64{call}})
	l.anchorNow()

	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := evidence.Write(ctx, whole, l.options(claim, create, accept, call, result)); err != nil {
		t.Fatal(err)
	}
	if _, err := evidence.Verify(ctx, whole, l.vkey); err != nil {
		t.Fatalf("the whole evidence does not verify: %v", err)
	}
	cut := filepath.Join(t.TempDir(), "cut")
	if _, err := evidence.Write(ctx, cut, l.options(claim, create, accept, call)); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, cut, l.vkey)
	if err == nil {
		t.Errorf("an evidence of an observed claim citing call %d, without its call.result %d, verifies:\n%s", call, result, rep.String())
	} else if !strings.Contains(err.Error(), "call.result") || !strings.Contains(err.Error(), itoa(call)) {
		t.Errorf("Verify: %v\nwant it to name call %d's call.result missing", err, call)
	}
}

// TestReviewedClaimCallWithoutOutcomeSaid: a reviewed claim may cite a
// call that has no call.result before it, so Verify cannot refuse its
// evidence without one; but a forger can leave a failed call's result
// out of a genuine evidence the same way. The report must then say that
// the cited call's outcome is not in the evidence, rather than list the
// call as if that were all there is to it.
func TestReviewedClaimCallWithoutOutcomeSaid(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	create := l.append("task.create", "bob", map[string]any{"task_id": "t_1", "title": "write x"})
	accept := l.append("task.accept", "alice", map[string]any{"task_id": "t_1"})
	call := l.append(log.KindCall, "carol", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	result := l.append(log.KindCallResult, "carol", map[string]any{"call": call, "is_error": true, "duration_ns": 1000})
	claim := l.append("task.claim", "alice", map[string]any{"task_id": "t_1", "provenance": "reviewed", "summary": "checked", "evidence": []uint64{call}})
	l.anchorNow()

	cut := filepath.Join(t.TempDir(), "cut")
	if _, err := evidence.Write(ctx, cut, l.options(claim, create, accept, call)); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, cut, l.vkey)
	if err != nil {
		t.Fatalf("a reviewed claim's evidence without the cited call's result %d: %v", result, err)
	}
	if s := rep.String(); !strings.Contains(s, "its outcome (a call.result) is not in the evidence") {
		t.Errorf("the report does not say cited call %d's outcome is not in the evidence:\n%s", call, s)
	}
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := evidence.Write(ctx, whole, l.options(claim, create, accept, call, result)); err != nil {
		t.Fatal(err)
	}
	rep, err = evidence.Verify(ctx, whole, l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.String(); strings.Contains(s, "is not in the evidence") {
		t.Errorf("the report of the whole evidence says an outcome is missing:\n%s", s)
	}
}
