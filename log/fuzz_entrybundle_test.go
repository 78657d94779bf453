package log_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/provlog/provlog/log"
)

// FuzzParseEntryBundle: an entry bundle is what a remote log (log/client,
// `provlog audit --log`, export) sends; ParseEntryBundle never panics,
// accepts at most log.TileWidth entries, and what it accepts is exactly
// what MarshalEntryBundle writes of them.
func FuzzParseEntryBundle(f *testing.F) {
	good, err := log.MarshalEntryBundle([][]byte{[]byte(`{"v":1}`), {}, bytes.Repeat([]byte("x"), 300)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0})
	f.Add([]byte{0, 5, 'a'})
	f.Add(bytes.Repeat([]byte{0, 0}, log.TileWidth+1))
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := log.ParseEntryBundle(b)
		if err != nil {
			return
		}
		if len(es) > log.TileWidth {
			t.Fatalf("accepted %d entries", len(es))
		}
		again, err := log.MarshalEntryBundle(es)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, which MarshalEntryBundle writes as %x (%v)", b, again, err)
		}
	})
}

// allocated returns the allocations and the bytes allocated by one run of
// f (the mean of runs runs).
func allocated(runs int, f func()) (allocs, bytes float64) {
	f()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&b)
	return float64(b.Mallocs-a.Mallocs) / float64(runs), float64(b.TotalAlloc-a.TotalAlloc) / float64(runs)
}

// TestParseEntryBundleLinear: bundles of 32, 64, 128 and 256 entries (of
// 1000 bytes, and of none): each doubling at most doubles the
// allocations and the bytes allocated (counts, not time).
func TestParseEntryBundleLinear(t *testing.T) {
	for _, size := range []int{0, 1000} {
		var prevA, prevB float64
		for _, n := range []int{32, 64, 128, 256} {
			es := make([][]byte, n)
			for i := range es {
				es[i] = bytes.Repeat([]byte{'e'}, size)
			}
			b, err := log.MarshalEntryBundle(es)
			if err != nil {
				t.Fatal(err)
			}
			a, by := allocated(20, func() {
				if got, err := log.ParseEntryBundle(b); err != nil || len(got) != n {
					t.Fatalf("%d entries: %d, %v", n, len(got), err)
				}
			})
			if prevA > 0 && (a > 2*prevA+2 || by > 2.2*prevB+64) {
				t.Errorf("entries of %d bytes: %d entries cost %.0f allocations, %.0f bytes; half as many %.0f, %.0f: want at most double",
					size, n, a, by, prevA, prevB)
			}
			prevA, prevB = a, by
		}
	}
}
