package proxy

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestHoldsCoreLinear counts what holdsCore reads and compares
// (holdsCoreWork) in texts of n, 2n and 4n bytes of periodic base64
// against a redacted value of a 96th of the text (a client may send
// megabytes): doubling the text, and the value with it, may at most
// double the count (and 5% for what is not doubled). Each core was compared in full at each place the
// filter hit, and in a periodic text that is nearly every place: the
// count quadrupled with each doubling.
func TestHoldsCoreLinear(t *testing.T) {
	shapes := []struct {
		name string
		make func(n int) (text, secret string)
	}{
		{"periodic, value differs at its end", func(n int) (string, string) {
			return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", n*3/4))), strings.Repeat("A", n/96) + "BBB"
		}},
		{"periodic, mixed case, value differs at its end", func(n int) (string, string) {
			return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("aB", n*3/8))), strings.Repeat("Ab", n/192) + "CCC"
		}},
		{"periodic, found at the end", func(n int) (string, string) {
			x := strings.Repeat("A", n/96) + "BBB"
			return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", n*3/4) + x)), x
		}},
	}
	for _, sh := range shapes {
		var works []int
		for _, n := range []int{1 << 14, 1 << 15, 1 << 16} {
			text, secret := sh.make(n)
			cores := base64Cores([]string{secret})
			f := newCoreFilter(cores, 0)
			w := 0
			got := holdsCoreWork(f, text, &w)
			want := false
			for _, c := range cores {
				want = want || strings.Contains(strings.Map(blindRune, text), strings.Map(blindRune, c))
			}
			if got != want {
				t.Fatalf("%s, %d bytes: holdsCore = %v, a search says %v", sh.name, n, got, want)
			}
			works = append(works, w)
		}
		for i := 1; i < len(works); i++ {
			if works[i] > 2*works[i-1]+works[i-1]/20 { // 2.05x: the text's and the value's ends are not doubled
				t.Errorf("%s: %d bytes and symbols looked at for a text of %d bytes, %d for %d (%.1fx per doubling); want at most double",
					sh.name, works[i-1], 1<<(13+i), works[i], 1<<(14+i), float64(works[i])/float64(works[i-1]))
			}
		}
	}
}

// blindRune is a byte read case-blind (caseBlind), as a rune.
func blindRune(r rune) rune {
	if r >= 256 {
		return -1
	}
	return rune(caseBlind[r])
}

// TestScrubShortLinesLinear counts the work of holdsCore and indexFolded
// over the lines of a server's stderr, each scrubbed by itself (76
// characters of periodic base64 a line), against a redacted value of a
// 96th of the text: doubling both may at most double the count. A
// search's table of the value (an int32 a byte) was made for each line
// its first bytes were in, though no line can hold the value: lines ×
// value, 4x per doubling.
func TestScrubShortLinesLinear(t *testing.T) {
	var hold, index []int
	for _, n := range []int{1 << 14, 1 << 15, 1 << 16} {
		e := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("A", n*3/4)))
		secret := strings.Repeat("A", n/96) + "BBB"
		f := newCoreFilter(base64Cores([]string{secret}), 0)
		fx, _ := foldCase(secret)
		h, x := 0, 0
		for i := 0; i < len(e); i += 76 {
			line := e[i:min(i+76, len(e))]
			holdsCoreWork(f, line, &h)
			fl, _ := foldCase(strings.Repeat("A", 76))
			indexFoldedWork(fl, fx, &x)
		}
		hold, index = append(hold, h), append(index, x)
	}
	for name, works := range map[string][]int{"holdsCore": hold, "indexFolded": index} {
		for i := 1; i < len(works); i++ {
			if works[i] > 2*works[i-1]+works[i-1]/20 {
				t.Errorf("%s: %d bytes and symbols looked at for lines of %d bytes, %d for %d (%.1fx per doubling); want at most double",
					name, works[i-1], 1<<(13+i), works[i], 1<<(14+i), float64(works[i])/float64(works[i-1]))
			}
		}
	}
}
