package blobs

import (
	"slices"
	"testing"
	"time"
)

// TestHoldAndDoom: a purge dooms only the blobs no entry on its way holds,
// and a Hold of a doomed blob waits until the purge is done with it, so
// that the entry it is for never names a blob deleted meanwhile.
func TestHoldAndDoom(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Put([]byte("a"))
	b, _ := s.Put([]byte("b"))
	release := s.Hold(a)
	names := []string{a, b}
	slices.Sort(names)
	if got := s.Doom(names); !slices.Equal(got, []string{b}) {
		t.Fatalf("Doom with %s held: %v, want only %s", a[:8], got, b[:8])
	}
	if got := s.Doom([]string{b}); len(got) != 0 {
		t.Fatalf("a second Doom of a doomed blob: %v", got)
	}
	release()
	release() // harmless
	held := make(chan struct{})
	go func() {
		r := s.Hold(b)
		close(held)
		r()
	}()
	select {
	case <-held:
		t.Fatal("a Hold of a doomed blob did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Purge(b); err != nil {
		t.Fatal(err)
	}
	s.Undoom([]string{b})
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the Hold still waits after Undoom")
	}
	if got := s.Doom([]string{a}); !slices.Equal(got, []string{a}) {
		t.Fatalf("Doom once the hold ended: %v", got)
	}
}
