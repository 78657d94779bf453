package opp

import (
	"encoding/binary"
	"encoding/hex"
	"slices"
	"testing"
)

func testID(k uint64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[8:], k*0x9e3779b97f4a7c15)
	return "t_" + hex.EncodeToString(b[:])
}

// TestIndex: through the table's growth, every indexed task is found with
// its chain of entries in order, and ids never indexed are not found.
func TestIndex(t *testing.T) {
	x := newIndex()
	defer x.mem.release()
	const tasks = 50_000 // past several table growths and chunks
	for k := range uint64(tasks) {
		n, err := x.add(testID(k), 10*k)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(n) != k {
			t.Fatalf("task %d got number %d", k, n)
		}
	}
	for k := uint64(0); k < tasks; k += 7 { // some tasks get two more entries
		n, _ := x.lookup(testID(k))
		x.extend(n, 10*k+1, StateAccepted)
		x.extend(n, 10*k+2, StateCompleted)
	}
	for k := range uint64(tasks) {
		n, ok := x.lookup(testID(k))
		if !ok || uint64(n) != k {
			t.Fatalf("task %d: lookup gave %d, %v", k, n, ok)
		}
		want, st := []uint64{10 * k}, StatePending
		if k%7 == 0 {
			want, st = []uint64{10 * k, 10*k + 1, 10*k + 2}, StateCompleted
		}
		if got := x.entries(n); !slices.Equal(got, want) {
			t.Fatalf("task %d: entries %v, want %v", k, got, want)
		}
		if h := x.heads.at(n); h.state != stateCodes[st] || x.created(n) != 10*k || x.lastIndex(n) != want[len(want)-1] {
			t.Fatalf("task %d: head %+v", k, h)
		}
	}
	for k := uint64(tasks); k < tasks+1000; k++ {
		if n, ok := x.lookup(testID(k)); ok {
			t.Fatalf("never indexed task %d found as %d", k, n)
		}
	}
	if _, ok := x.lookup("t_not-hex"); ok {
		t.Fatal("a malformed id was found")
	}
	// A position holds indices up to 2^40, and the index refuses larger.
	for _, i := range []uint64{0, 1, 255, 256, 1<<32 - 1, 1 << 32, maxPos - 1} {
		if p := posOf(i); p.index() != i {
			t.Errorf("posOf(%d).index() = %d", i, p.index())
		}
	}
	if _, err := x.add(testID(tasks+5000), maxPos); err == nil {
		t.Error("a log index of 2^40 was indexed")
	}
}
