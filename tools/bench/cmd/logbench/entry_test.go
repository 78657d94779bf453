package main

import (
	"testing"

	"github.com/provlog/provlog/log"
)

// The benchmark's entries are exactly EntrySize bytes, valid provlog "call"
// entries in canonical form, and carry their seq.
func TestMakeEntry(t *testing.T) {
	for _, s := range []uint64{0, 1, 99, 123456789, 1 << 40} {
		e := makeEntry(s)
		if len(e) != EntrySize {
			t.Fatalf("entry %d is %d bytes, want %d", s, len(e), EntrySize)
		}
		if g, err := entrySeq(e); err != nil || g != s {
			t.Fatalf("entrySeq of entry %d = %d, %v", s, g, err)
		}
		if _, err := log.ParseEntry(e); err != nil {
			t.Fatalf("entry %d: %v", s, err)
		}
	}
	if string(makeEntry(1)) == string(makeEntry(2)) {
		t.Fatal("entries 1 and 2 are equal")
	}
}
