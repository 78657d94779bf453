package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/client"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestEvidenceFilesBounded: a log whose key signs a fork and sends it
// again and again leaves one evidence file, not one a request (each
// request wrote a new file before, without bound), and a data dir stops
// collecting at maxEvidenceFiles, saying so.
func TestEvidenceFilesBounded(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/repeat")
	honest, evil := witnesstest.NewLog(t, k, "honest"), witnesstest.NewLog(t, k, "evil")
	cfgPath, vkey := witnessSetup(t, k)
	v, _ := log.NewCosignatureVerifier(vkey)
	addr, stderr, stop := serve(t, cfgPath)
	h, err := client.NewHTTP("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewWitness(h, v, honest.Store).Cosign(context.Background(), honest.Grow(t, 5)); err != nil {
		t.Fatal(err)
	}
	forked := evil.Grow(t, 5)
	for range 4 {
		if _, err := client.NewWitness(h, v, evil.Store).Cosign(context.Background(), forked); err == nil {
			t.Fatal("the fork was cosigned")
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr)
	}
	dir := filepath.Join(filepath.Dir(cfgPath), "state", "evidence")
	files, _ := filepath.Glob(filepath.Join(dir, "*-fork-*.json"))
	if len(files) != 1 {
		t.Fatalf("one fork sent four times left %d evidence files: %v", len(files), files)
	}

	for i := len(files); i < maxEvidenceFiles; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("other-%d.json", i)), nil, 0o644)
	}
	other := witness.ForkFromProof(evil.Checkpoint(t, 5), witnesstest.NewLog(t, k, "third").Grow(t, 5), nil)
	if other == nil {
		t.Fatal("no evidence from two checkpoints of size 5")
	}
	if _, err := writeEvidence(dir, other); err == nil || !strings.Contains(err.Error(), "holds 1000 evidence files already") {
		t.Fatalf("evidence past the bound: %v", err)
	}
	// The evidence already written is still found.
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	first, err := witness.ParseEvidence(b)
	if err != nil {
		t.Fatal(err)
	}
	if path, err := writeEvidence(dir, first); err != nil || path != files[0] {
		t.Fatalf("evidence written before: %q %v", path, err)
	}
}
