package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// strayFiles is how many files a forger adds to a genuine evidence
// directory: each is three problems of its own (it is not part of an
// evidence directory, and the manifest does not list it: two lines).
const strayFiles = 5000

// TestVerifyEvidenceProblemsBounded: a real sidecar's evidence of a call,
// with 5,000 empty files added, is 15,000 problems. The checker keeps the
// first log.MaxProblems and counts the rest, as the bundle checker does
// (before: it kept all 15,000 and the command printed 100); verify-evidence
// still says how many there were, and still fails.
func TestVerifyEvidenceProblemsBounded(t *testing.T) {
	data, index := actorWordsLog(t, "alice")
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	for i := range strayFiles {
		if err := os.WriteFile(filepath.Join(ev, fmt.Sprintf("stray-%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vkey, err := os.ReadFile(filepath.Join(data, logVKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	_, err = evidence.Verify(context.Background(), ev, string(vkey))
	var pe *log.ProblemsError
	if !errors.As(err, &pe) {
		t.Fatalf("verify of %d stray files: %v, want problems", strayFiles, err)
	}
	if len(pe.Problems) > log.MaxProblems || pe.Count() != 3*strayFiles {
		t.Errorf("the evidence checker keeps %d problems of %d counted, want at most %d kept of %d", len(pe.Problems), pe.Count(), log.MaxProblems, 3*strayFiles)
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if code == 0 || !strings.Contains(out, fmt.Sprintf("(%d problems)", 3*strayFiles)) || strings.Count(out, "FAILED ") > log.MaxProblems+1 {
		t.Errorf("verify-evidence: exit %d, want the count %d and at most %d lines:\n%.2000s", code, 3*strayFiles, log.MaxProblems+1, out)
	}
}
