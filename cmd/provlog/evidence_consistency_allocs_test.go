package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
)

// TestVerifyEvidenceConsistencyAllocs: a real sidecar's evidence of a
// call whose consistency file a forger replaced with 48 MB of empty
// lines, under the 64 MiB an evidence directory may hold. The checker
// refuses it (a proof has at most 128 lines), and must do so in memory
// linear in the file with a small factor: it split the whole file into
// lines first, a string header of 16 bytes for every byte (972 MB for 50
// MB, 19.3 times the file), where it needs the first 131 lines; now at
// most 4 times. TotalAlloc is counted, not time.
func TestVerifyEvidenceConsistencyAllocs(t *testing.T) {
	data, index := actorWordsLog(t, "alice")
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	p := filepath.Join(ev, evidence.ConsistencyFile)
	head, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	forged := append(head, bytes.Repeat([]byte("\n"), 48<<20)...)
	if err := os.WriteFile(p, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	vkey, err := os.ReadFile(filepath.Join(data, logVKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	forged = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = evidence.Verify(context.Background(), ev, string(vkey))
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("evidence with a forged consistency file verifies")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	size := uint64(len(head) + 48<<20)
	t.Logf("consistency file of %d bytes: verify allocated %d bytes (%.1f times)", size, alloc, float64(alloc)/float64(size))
	if alloc > 4*size {
		t.Errorf("verify allocated %d bytes for a consistency file of %d (%.1f times), want at most 4 times", alloc, size, float64(alloc)/float64(size))
	}
}
