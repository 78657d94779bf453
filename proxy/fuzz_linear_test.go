package proxy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestFrontParsersLinear: what a client sends (an HTTP request's body,
// parseFast and parseWire) and what a server answers (decodeDown of a
// stdio line, an SSE stream fed in 512-byte pieces): messages of 16000 to
// 64000 members, array elements, escapes and nested values. Each
// doubling at most doubles the allocations, and the bytes allocated per
// input byte stay within 2x of the smallest's (counts, not time; a
// growing slice's copies step with its capacity). The sizes start past
// the pooled buffers' bound: below some 64 KiB a message costs 3
// allocations, above it some 30, a step, not a growth.
func TestFrontParsersLinear(t *testing.T) {
	req := func(args string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":` + args + `}}`)
	}
	shapes := map[string]func(n int) []byte{
		"members": func(n int) []byte {
			var b strings.Builder
			b.WriteString("{")
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"k%d":%d`, i, i)
			}
			return req(b.String() + "}")
		},
		"elements": func(n int) []byte { return req("[" + strings.Repeat(`1,"a",`, n) + "1]") },
		"escapes":  func(n int) []byte { return req(`"` + strings.Repeat(`\u00e9\"`, n) + `"`) },
		"nested":   func(n int) []byte { return req(strings.Repeat(`{"a":[`, n/16) + strings.Repeat("]}", n/16)) },
		"answer": func(n int) []byte {
			return []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[` + strings.Repeat(`{"type":"text","text":"t\n"},`, n) + `{"type":"text","text":""}]}}`)
		},
	}
	parsers := map[string]func([]byte){
		"parseFast":  func(b []byte) { parseFast(b) },
		"parseWire":  func(b []byte) { parseWire(b) },
		"decodeDown": func(b []byte) { decodeDown(b) },
		"sseParser": func(b []byte) {
			var s sseParser
			in := []byte("data: " + string(b) + "\n\n")
			for i := 0; i < len(in); i += 512 {
				s.feed(in[i:min(i+512, len(in))], func([]byte) bool { return true })
			}
		},
	}
	for pn, parse := range parsers {
		for sn, shape := range shapes {
			var prevA, firstB float64
			for _, n := range []int{16000, 32000, 64000} {
				in := shape(n)
				parse(in)
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				a0, b0 := m.Mallocs, m.TotalAlloc
				const runs = 1
				for range runs {
					parse(in)
				}
				runtime.ReadMemStats(&m)
				allocs, bytes := float64(m.Mallocs-a0)/runs, float64(m.TotalAlloc-b0)/runs
				if prevA > 0 && allocs > 2*prevA+8 {
					t.Errorf("%s, %s, %d: %.0f allocations; half the size: %.0f: want at most double", pn, sn, n, allocs, prevA)
				}
				if perByte := bytes / float64(len(in)); firstB == 0 {
					firstB = perByte + 1
				} else if perByte > 2*firstB {
					t.Errorf("%s, %s, %d: %.1f bytes allocated per input byte, %.1f at size 16000: want at most 2x", pn, sn, n, perByte, firstB)
				}
				prevA = allocs
			}
		}
	}
}
