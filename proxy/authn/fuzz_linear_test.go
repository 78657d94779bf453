package authn

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestParseClaimsLinear: a JWT's claims are read before its signature is
// checked, so anyone who can reach the sidecar chooses them. Claims sets
// of 2000, 4000, 8000 and 16000 audiences (escaped, so each is decoded),
// members and nested values: each doubling at most doubles parseClaims'
// allocations, and its bytes allocated stay in proportion to the input
// (counts, not time; FuzzParseClaims holds what it reads to
// encoding/json).
func TestParseClaimsLinear(t *testing.T) {
	shapes := map[string]func(n int) []byte{
		"audiences": func(n int) []byte {
			return []byte(`{"aud":[` + strings.Repeat(`"a\u00e9",`, n) + `"x"],"sub":"s"}`)
		},
		"members": func(n int) []byte {
			var b strings.Builder
			b.WriteString(`{"sub":"s"`)
			for i := range n {
				fmt.Fprintf(&b, `,"k%d":[1,{"a":"\u00e9"}]`, i)
			}
			return []byte(b.String() + "}")
		},
		"nested in act": func(n int) []byte {
			deep := strings.Repeat("[", n/4) + strings.Repeat("]", n/4) // encoding/json nests at most 10000 deep
			return []byte(`{"act":{"sub":"a","x":` + deep + `,"act":{"sub":"b","y":` + deep + `}},"scp":[` + strings.Repeat(`"s",`, n) + `"t"]}`)
		},
	}
	for name, shape := range shapes {
		var prevA, firstB float64
		for _, n := range []int{2000, 4000, 8000, 16000} {
			in := shape(n)
			if _, err := parseClaims(in); err != nil {
				t.Fatalf("%s, %d: %v", name, n, err)
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			a0, b0 := m.Mallocs, m.TotalAlloc
			const runs = 5
			for range runs {
				parseClaims(in)
			}
			runtime.ReadMemStats(&m)
			allocs, bytes := float64(m.Mallocs-a0)/runs, float64(m.TotalAlloc-b0)/runs
			// A growing slice's bytes step with its capacity (1.25x at
			// a time, the bytes of all its copies some 5x its own), so
			// bytes are held to the input's length: per input byte, at
			// most 2x what the smallest size cost (a list's rise
			// slowly, 15 to 21 over 8000 to 64000 audiences; quadratic
			// growth would be 2x a doubling, 8x over the series).
			if prevA > 0 && allocs > 2*prevA+8 {
				t.Errorf("%s, %d: %.0f allocations; half the size: %.0f: want at most double", name, n, allocs, prevA)
			}
			if perByte := bytes / float64(len(in)); firstB == 0 {
				firstB = perByte
			} else if perByte > 2*firstB {
				t.Errorf("%s, %d: %.1f bytes allocated per input byte, %.1f at size 2000: want at most 2x", name, n, perByte, firstB)
			}
			prevA = allocs
		}
	}
}
