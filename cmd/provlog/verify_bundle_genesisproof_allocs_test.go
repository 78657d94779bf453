package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/provlog/provlog/log/bundle"
)

// TestVerifyBundleGenesisProofAllocs: a genuine bundle of entries [2, 5)
// whose genesis.proof a forger replaced with 7.5 million words "x", 15 MB,
// under the 16 MiB a bundle file may have. An inclusion proof has at most
// 64 hashes: verify-bundle refuses it, and must do so in memory linear in
// the file with a small factor: it split the whole file into words first
// (a string header of 16 bytes for every two bytes) and decoded each,
// keeping a slice for each (1,112 MB allocated, 74.2 times the file); now
// at most 4 times. TotalAlloc is counted, not time.
func TestVerifyBundleGenesisProofAllocs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	if msg, code := runCmd(t, "export", "--data", makeDataDir(t, 4), "--from", "2", "--out", dir); code != 0 {
		t.Fatalf("export: %d %s", code, msg)
	}
	forged := bytes.Repeat([]byte("x\n"), 7_500_000)
	rewriteBundleFile(t, dir, bundle.GenesisProof, forged, nil)
	size := uint64(len(forged))
	forged = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := run(context.Background(), []string{"verify-bundle", dir}, io.Discard, io.Discard)
	runtime.ReadMemStats(&after)
	if code == 0 {
		t.Fatal("verify-bundle of a forged genesis.proof: exit 0")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("genesis.proof of %d bytes: verify-bundle allocated %d bytes (%.1f times)", size, alloc, float64(alloc)/float64(size))
	if alloc > 4*size {
		t.Errorf("verify-bundle allocated %d bytes for a genesis.proof of %d (%.1f times), want at most 4 times", alloc, size, float64(alloc)/float64(size))
	}
}
