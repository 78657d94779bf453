package log

import (
	"fmt"
	"strings"
	"testing"
)

// manyKeys is an object with n distinct keys: the shape of the
// notifications/cancelled params that cost quadratic CPU before
// (10,000 / 20,000 / 40,000 keys: 0.29 s / 0.88 s / 3.18 s in the proxy,
// two 3.9 MB requests 6.5 CPU-minutes), when WalkObject compared every key
// with every earlier one.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"requestId":1`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":%d`, i, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestDuplicateChecksLinear counts the work of finding duplicate keys
// (key comparisons and map lookups, not time) for objects of n and 2n
// keys, in WalkObject and in Canonicalize's object reader: doubling the
// keys may at most double it (quadratic work would quadruple it). The
// allocations are held to the same bound.
func TestDuplicateChecksLinear(t *testing.T) {
	walk := func(data []byte) int {
		p := &jcsParser{in: data}
		if err := walkObject(p, func(string, []byte, []byte) error { return nil }, nil); err != nil {
			t.Fatal(err)
		}
		return p.probes
	}
	canon := func(data []byte) int {
		p := &jcsParser{in: data}
		if err := p.value(0); err != nil {
			t.Fatal(err)
		}
		return p.probes
	}
	for _, n := range []int{10000, 20000} {
		small, big := manyKeys(n), manyKeys(2*n)
		for _, c := range []struct {
			name  string
			count func([]byte) int
		}{{"WalkObject", walk}, {"Canonicalize", canon}} {
			ws, wb := c.count(small), c.count(big)
			if ws < n || wb > 2*ws+64 {
				t.Errorf("%s: %d probes for %d keys, %d for %d keys; want at least n and at most double", c.name, ws, n+1, wb, 2*n+1)
			}
		}
		as := testing.AllocsPerRun(3, func() { WalkObject(small, func(string, []byte, []byte) error { return nil }) })
		ab := testing.AllocsPerRun(3, func() { WalkObject(big, func(string, []byte, []byte) error { return nil }) })
		if ab > 2.2*as {
			t.Errorf("WalkObject: %.0f allocations for %d keys, %.0f for %d keys; want at most double", as, n+1, ab, 2*n+1)
		}
	}
}

// BenchmarkWalkObjectKeys walks the objects the quadratic reader took
// 0.29 s / 0.88 s / 3.18 s for.
func BenchmarkWalkObjectKeys(b *testing.B) {
	for _, n := range []int{10000, 20000, 40000} {
		data := manyKeys(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				WalkObject(data, func(string, []byte, []byte) error { return nil })
			}
		})
	}
}
