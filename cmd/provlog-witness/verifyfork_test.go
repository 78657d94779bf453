package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestVerifyFork: the evidence check writes is verified offline with the
// log's key alone (its FORK message says so; before there was no command
// to do it), with every key of a log that rotated its key, and a changed
// byte, another log's key, rollback evidence or a file too large to be
// evidence each fail with exit 1, saying why.
func TestVerifyFork(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/forked")
	honest, evil := witnesstest.NewLog(t, k, "honest"), witnesstest.NewLog(t, k, "evil")
	honest.Grow(t, 7)
	evil.Grow(t, 40)
	data, dir := t.TempDir(), t.TempDir()
	fork := filepath.Join(dir, "fork.json")
	runCmd(t, "check", "--log", honest.Prefix(), "--vkey", k.VKey, "--data", data)
	if code, _, errOut := runCmd(t, "check", "--log", evil.Prefix(), "--vkey", k.VKey, "--data", data, "--evidence", fork); code != 1 || !strings.Contains(errOut, "FORK") {
		t.Fatalf("check of the fork: %d %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "verify-fork", "--vkey", k.VKey, fork); code != 0 || !strings.Contains(out, "OK: "+fork+" proves a fork of log.example/forked") {
		t.Fatalf("verify-fork: %d %q %q", code, out, errOut)
	}

	// A log that rotated its key: one checkpoint under each.
	k2 := witnesstest.NewKey(t, "log.example/forked")
	rotated := witnesstest.NewLog(t, k2, "rotated")
	ev := witness.ForkFromProof(honest.Checkpoint(t, 7), rotated.Grow(t, 7), nil)
	if ev == nil {
		t.Fatal("no evidence from two checkpoints of size 7")
	}
	rot := filepath.Join(dir, "rotated.json")
	os.WriteFile(rot, ev.Marshal(), 0o644)
	if code, out, errOut := runCmd(t, "verify-fork", "--vkey", k.VKey, "--vkey", k2.VKey, rot); code != 0 || !strings.Contains(out, "OK:") {
		t.Fatalf("verify-fork with both keys: %d %q %q", code, out, errOut)
	}

	b, _ := os.ReadFile(fork)
	forged, err := witness.ParseEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	forged.RootAtSmallerSize = "AAAA" + forged.RootAtSmallerSize[4:]
	changed := filepath.Join(dir, "changed.json")
	os.WriteFile(changed, forged.Marshal(), 0o644)
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(strings.Repeat(" ", maxEvidenceFile+1)), 0o644)
	small := witnesstest.NewLog(t, k, "small")
	small.Grow(t, 3)
	runCmd(t, "check", "--log", small.Prefix(), "--vkey", k.VKey, "--data", data)
	rollbacks, _ := filepath.Glob(filepath.Join(data, "evidence", "*-rollback-*.json"))
	if len(rollbacks) != 1 {
		t.Fatalf("rollback evidence files: %v", rollbacks)
	}
	other := witnesstest.NewKey(t, "log.example/forked")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a changed root", []string{"--vkey", k.VKey, changed}, "does not prove a fork"},
		{"one key of two", []string{"--vkey", k.VKey, rot}, "checkpoint 2"},
		{"another log's key", []string{"--vkey", other.VKey, fork}, "checkpoint 1"},
		{"rollback evidence", []string{"--vkey", k.VKey, rollbacks[0]}, "rollback evidence, which alone proves no fork"},
		{"a file too large", []string{"--vkey", k.VKey, big}, "over 1048576 bytes"},
		{"no key", []string{fork}, "--vkey is required"},
	} {
		code, out, errOut := runCmd(t, append([]string{"verify-fork"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a failure saying %q", tc.name, code, out, errOut, tc.want)
		}
	}
}
