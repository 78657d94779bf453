package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/bundle"
)

// forgedProofs is how many proofs the forged consistency.json holds: each
// is a problem of its own (no anchor record needs a proof at its size).
const forgedProofs = 5000

// forgeConsistency replaces a genuine bundle's consistency.json with one
// of forgedProofs well-formed proofs, listed in the manifest.
func forgeConsistency(t *testing.T, dir string) {
	t.Helper()
	var cf bundle.Consistency
	for i := 1; i <= forgedProofs; i++ {
		cf.Proofs = append(cf.Proofs, bundle.SizeProof{Size: uint64(i), Proof: []bundle.Hash{}})
	}
	b, err := json.Marshal(&cf)
	if err != nil {
		t.Fatal(err)
	}
	rewriteBundleFile(t, dir, bundle.ConsistencyFile, b, nil)
}

// TestVerifyBundleProblemsBounded: a forged consistency.json of 5,000
// proofs no record needs is 5,000 problems. verify-bundle prints the first
// ones and how many there were, not one line each (before: 5,000 FAILED
// lines; a 12 MB file gave 150,001 lines, 21 MB on stderr), and with
// --json lists as many with the count. It still fails.
func TestVerifyBundleProblemsBounded(t *testing.T) {
	data := makeDataDir(t, 4)
	dir := exportBundle(t, data, "")
	forgeConsistency(t, dir)
	ctx := context.Background()

	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"verify-bundle", dir}, &stdout, &stderr)
	if code == 0 {
		t.Fatalf("verify-bundle of a forged consistency.json: exit 0: %s", stdout.String())
	}
	failed := strings.Count(stderr.String(), "FAILED "+bundle.ConsistencyFile)
	if failed > 100 {
		t.Errorf("verify-bundle prints %d problem lines (%d bytes on stderr), want at most 100", failed, stderr.Len())
	}
	more := fmt.Sprintf("and %d more problems", forgedProofs-failed)
	if failed == 0 || !strings.Contains(stderr.String(), more) || !strings.Contains(stderr.String(), fmt.Sprintf("(%d problems)", forgedProofs)) {
		t.Errorf("verify-bundle does not say %q and the count %d: %.2000s", more, forgedProofs, stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	code = run(ctx, []string{"verify-bundle", "--json", dir}, &stdout, &stderr)
	if code == 0 {
		t.Fatalf("verify-bundle --json of a forged consistency.json: exit 0")
	}
	var v struct {
		OK       bool              `json:"ok"`
		Problems []json.RawMessage `json:"problems"`
		Count    int               `json:"count"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("verify-bundle --json: %v: %.500s", err, stdout.String())
	}
	if v.OK || len(v.Problems) == 0 || len(v.Problems) > 100 || v.Count != forgedProofs {
		t.Errorf("verify-bundle --json: ok %v, %d problems listed (%d bytes), count %d; want at most 100 listed, count %d",
			v.OK, len(v.Problems), stdout.Len(), v.Count, forgedProofs)
	}
	if failed := strings.Count(stderr.String(), "FAILED "+bundle.ConsistencyFile); failed > 100 {
		t.Errorf("verify-bundle --json prints %d problem lines on stderr, want at most 100", failed)
	}
}
