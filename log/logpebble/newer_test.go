package logpebble

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestOpenNewerState: a store whose state a newer build wrote (a state
// version above stateVersion) is not called corrupt: Open, writable or
// read-only, says a newer provlog wrote it and which versions this build
// reads, and leaves it as it is (its keys and its published record).
func TestOpenNewerState(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	must(t, err)
	a := newAppender()
	for range 3 {
		must(t, s.Commit(t.Context(), a.batch(make([][]byte, 100))))
	}
	must(t, s.Close())
	db := openRaw(t, dir)
	editState(t, db, func(v []byte) []byte { v[0] = stateVersion + 1; return v })
	must(t, db.Close())
	before := storeContent(t, dir)

	want := fmt.Sprintf("written by a newer provlog (state version %d; this build reads up to %d)", stateVersion+1, stateVersion)
	for _, ro := range []bool{false, true} {
		s, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil {
			s.Close()
			t.Fatalf("Open (read-only %v) succeeded on a state of version %d", ro, stateVersion+1)
		}
		if errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open (read-only %v): %v\nwant an error saying %q, not that the store is corrupt", ro, err, want)
		}
		if after := storeContent(t, dir); after != before {
			t.Errorf("Open (read-only %v) changed the store:\nbefore %s\nafter  %s", ro, before, after)
		}
	}
}

// storeContent sums what the store in dir holds: every key and value
// Pebble reads, and the published record's slots.
func storeContent(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	db := openRaw(t, dir)
	it, err := db.NewIter(nil)
	must(t, err)
	n := 0
	for it.First(); it.Valid(); it.Next() {
		fmt.Fprintf(h, "%d:%x=%d:%x;", len(it.Key()), it.Key(), len(it.Value()), it.Value())
		n++
	}
	must(t, it.Close())
	must(t, db.Close())
	for i := range 2 {
		b, err := os.ReadFile(publishedName(dir, i))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return fmt.Sprintf("%d keys, sum %x", n, h.Sum(nil))
}
