package replay

import (
	"runtime"
	"strings"
	"testing"
)

// TestDiffDeepAllocs: replay compares a fresh result, whatever the
// server sent (encoding/json reads it up to 10,000 deep), with the record
// and with the other fresh runs. Comparing is linear in the result:
// before, diff built the path of every value it visited, each longer than
// its parent's, so 20 KB of brackets nested 9,990 deep, equal on both
// sides, cost 100 MB per comparison.
func TestDiffDeepAllocs(t *testing.T) {
	const depth = 9990
	body := strings.Repeat(`{"a":[`, depth/2) + `1` + strings.Repeat(`]}`, depth/2)
	other := strings.Repeat(`{"a":[`, depth/2) + `2` + strings.Repeat(`]}`, depth/2)
	a, err := decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := decode([]byte(body))
	c, _ := decode([]byte(other))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	same := diff("", a, b, true)
	changed := diff("", a, c, false)
	runtime.ReadMemStats(&after)
	if len(same) != 0 {
		t.Errorf("equal results differ at %d paths", len(same))
	}
	if want := strings.Repeat("/a/0", depth/2); len(changed) != 1 || changed[0] != want {
		t.Errorf("results differing in their innermost value: %d paths, want the one of depth %d", len(changed), depth)
	}
	got := after.TotalAlloc - before.TotalAlloc
	if got > 64*uint64(len(body)) {
		t.Errorf("two comparisons of %d-byte results nested %d deep allocated %d MB (%.1f times their size), want it linear", len(body), depth, got>>20, float64(got)/float64(len(body)))
	}
}
