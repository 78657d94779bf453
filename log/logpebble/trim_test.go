//go:build cgo && linux

package logpebble

import (
	"path/filepath"
	"testing"
)

// TestTrim: built with cgo on glibc (where Pebble's cache lives in C
// malloc's heaps), a Store runs its trimmer, and Close stops it.
func TestTrim(t *testing.T) {
	if !canTrimMalloc() {
		t.Fatal("built with cgo on linux, but no glibc malloc to trim: Pebble's freed cache blocks would stay resident")
	}
	s, err := Open(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.trim
	if tr == nil {
		t.Fatal("the store runs no trimmer")
	}
	trimMalloc()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tr.done:
	default:
		t.Fatal("Close returned with the trimmer still running")
	}
}
