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

// TestVerifyEvidenceWitnessesAllocs: a real sidecar's evidence of a
// call with a witnesses.txt a forger wrote: "threshold 1" and 24 million
// lines "x", 48 MB, under the 64 MiB an evidence directory may hold. The
// checker refuses it at its first key, and must do so in memory linear
// in the file with a small factor: log.ParseWitnessPolicy split the whole
// file into lines first (a string header of 16 bytes for every two bytes)
// and wrote it out again to compare (670 MB for 50 MB, 13.3 times the
// file); now at most 4 times, the
// directory's read included. TotalAlloc is counted, not time.
func TestVerifyEvidenceWitnessesAllocs(t *testing.T) {
	data, index := actorWordsLog(t, "alice")
	ev := filepath.Join(t.TempDir(), "ev")
	if out, code := runCmd(t, "evidence", "--data", data, "--index", fmt.Sprint(index), "--out", ev); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s", code, out)
	}
	p := filepath.Join(ev, evidence.WitnessesFile)
	head := []byte("threshold 1\n")
	forged := append(head, bytes.Repeat([]byte("x\n"), 24<<20)...)
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
		t.Fatal("evidence with a forged witnesses.txt verifies")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	size := uint64(len(head) + 48<<20)
	t.Logf("witnesses.txt of %d bytes: verify allocated %d bytes (%.1f times)", size, alloc, float64(alloc)/float64(size))
	if alloc > 4*size {
		t.Errorf("verify allocated %d bytes for a witnesses.txt of %d (%.1f times), want at most 4 times", alloc, size, float64(alloc)/float64(size))
	}
}
