package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/provlog/provlog/log/bundle"
)

// TestVerifyBundleConsistencyAllocs: a forger's consistency.json of 12 MB
// in a genuine bundle, under the 16 MiB a bundle file may have, so
// verify-bundle reads it whole. It must parse it in memory linear in its
// size with a small factor, whatever it holds: 160,000 well-formed proofs
// no anchor record needs cost 20 times the file's size (263 MB:
// encoding/json's decoder buffer, the typed values, a second decoding
// into a tree of maps to check member names, the hashes copied again),
// and 4,000,000 empty objects ({}, three bytes each) cost more (a
// zero-valued proof of 48 bytes each and the slice's growth: 772 MB
// peak RSS for provlog verify-bundle); now at most 8 times. TotalAlloc is
// counted, not time.
func TestVerifyBundleConsistencyAllocs(t *testing.T) {
	data := makeDataDir(t, 4)
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		name string
		elem func(i int) string
	}{
		{"proofs", func(i int) string { return fmt.Sprintf(`{"proof":[],"root":%q,"size":%d}`, root, i) }},
		{"empty", func(int) string { return "{}" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := exportBundle(t, data, "")
			var b bytes.Buffer
			b.WriteString(`{"proofs":[`)
			for i := 1; b.Len() < 12_000_000; i++ {
				if i > 1 {
					b.WriteByte(',')
				}
				b.WriteString(tc.elem(i))
			}
			b.WriteString(`]}`)
			rewriteBundleFile(t, dir, bundle.ConsistencyFile, b.Bytes(), nil)
			fi, err := os.Stat(filepath.Join(dir, bundle.ConsistencyFile))
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.Buffer{}

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			code := run(context.Background(), []string{"verify-bundle", dir}, io.Discard, io.Discard)
			runtime.ReadMemStats(&after)
			if code == 0 {
				t.Fatal("verify-bundle of a forged consistency.json: exit 0")
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("consistency.json %d bytes: verify-bundle allocated %d bytes (%.1f times)", fi.Size(), alloc, float64(alloc)/float64(fi.Size()))
			if alloc > 8*uint64(fi.Size()) {
				t.Errorf("verify-bundle allocated %d bytes for a consistency.json of %d (%.1f times), want at most 8 times", alloc, fi.Size(), float64(alloc)/float64(fi.Size()))
			}
		})
	}
}
