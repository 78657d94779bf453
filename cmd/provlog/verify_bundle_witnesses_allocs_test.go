package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/provlog/provlog/log/bundle"
)

// TestVerifyBundleWitnessesAllocs: a genuine bundle with a witnesses.txt
// a forger wrote in the form of bundles from before it named a threshold
// (one key a line, no "threshold" line): 7.5 million lines "x", 15 MB,
// under the 16 MiB a bundle file may have. verify-bundle refuses it at its
// first key, and must do so in memory linear in the file with a small
// factor: it split the whole file into lines first (a string header of 16
// bytes for every two bytes: 151 MB allocated, 10.1 times the file; 179
// MB peak RSS); now at most 4 times the
// file. TotalAlloc is counted, not time.
func TestVerifyBundleWitnessesAllocs(t *testing.T) {
	dir := exportBundle(t, makeDataDir(t, 4), "")
	forged := bytes.Repeat([]byte("x\n"), 7_500_000)
	rewriteBundleFile(t, dir, bundle.WitnessesFile, forged, func(m *bundle.Manifest) { m.Cosigned = true })
	size := uint64(len(forged))
	forged = nil
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := run(context.Background(), []string{"verify-bundle", dir}, io.Discard, io.Discard)
	runtime.ReadMemStats(&after)
	if code == 0 {
		t.Fatal("verify-bundle of a forged witnesses.txt: exit 0")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("witnesses.txt of %d bytes: verify-bundle allocated %d bytes (%.1f times)", size, alloc, float64(alloc)/float64(size))
	if alloc > 4*size {
		t.Errorf("verify-bundle allocated %d bytes for a witnesses.txt of %d (%.1f times), want at most 4 times", alloc, size, float64(alloc)/float64(size))
	}
}
