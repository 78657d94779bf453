package proxy

import (
	"strings"
	"testing"
)

// TestIndexFoldedLinear counts the bytes indexFolded's searches look at
// (indexFoldedWork) in texts of n, 2n and 4n bytes: doubling the text (and
// a redacted value with it) may at most double the count. A value that
// starts with a capital letter followed by a run the text repeats ("A" and
// 1s, in a text of 1s: a client sends both, as a redacted argument and as
// what an echoing server returns) made every byte of the text a
// candidate whose whole match was compared: the count quadrupled with
// each doubling, and one call with a 1 MiB echo and a 128 KiB password
// cost the sidecar 12.8 s of CPU in scrubbing its result.
func TestIndexFoldedLinear(t *testing.T) {
	shapes := []struct {
		name string
		make func(n int) (s, x string)
	}{
		{"capital then a repeated run", func(n int) (string, string) {
			return strings.Repeat("1", n), "A" + strings.Repeat("1", n/8)
		}},
		{"capitals then a repeated run", func(n int) (string, string) {
			return strings.Repeat("AB1", n/3), "AB" + strings.Repeat("1", n/8)
		}},
		{"found at the end", func(n int) (string, string) {
			x := "S3CRET-" + strings.Repeat("X1", n/16)
			return strings.Repeat("S3CRET-", n/7) + x, x
		}},
		{"all capitals", func(n int) (string, string) {
			return strings.Repeat("A", n), strings.Repeat("A", n/8) + "B"
		}},
	}
	for _, sh := range shapes {
		var works []int
		for _, n := range []int{1 << 14, 1 << 15, 1 << 16} {
			s, x := sh.make(n)
			w := 0
			got := indexFoldedWork(s, x, &w)
			if want := strings.Index(s, x); got != want {
				t.Fatalf("%s, %d bytes: indexFolded = %d, want %d", sh.name, n, got, want)
			}
			works = append(works, w)
		}
		for i := 1; i < len(works); i++ {
			if works[i] > 2*works[i-1]+64 {
				t.Errorf("%s: %d bytes looked at for a text of %d bytes, %d for %d (%.1fx per doubling); want at most double",
					sh.name, works[i-1], 1<<(13+i), works[i], 1<<(14+i), float64(works[i])/float64(works[i-1]))
			}
		}
	}
}
