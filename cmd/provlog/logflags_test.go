package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestEntryFlags: a command about one entry takes exactly one of --index
// and --leaf-hash, and a leaf hash of 64 hex digits.
func TestEntryFlags(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		args  []string
		index int64
		leaf  bool
		bad   string
	}{
		{args: []string{"--index", "3"}, index: 3},
		{args: []string{"--leaf-hash", hash}, index: -1, leaf: true},
		{args: nil, bad: "exactly one of --index and --leaf-hash"},
		{args: []string{"--index", "3", "--leaf-hash", hash}, bad: "exactly one of --index and --leaf-hash"},
		{args: []string{"--leaf-hash", "abc"}, bad: "--leaf-hash must be 64 hex digits"},
		{args: []string{"--leaf-hash", strings.Repeat("zz", 32)}, bad: "--leaf-hash must be 64 hex digits"},
	} {
		fs := newFlags("test", io.Discard)
		ef := addEntryFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		index, lh, err := ef.entry()
		if c.bad != "" {
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%v: %v, want a usage error saying %q", c.args, err, c.bad)
			}
			continue
		}
		if err != nil || index != c.index || (lh != nil) != c.leaf || c.leaf && len(lh) != 32 {
			t.Errorf("%v: index %d, leaf hash %x, %v", c.args, index, lh, err)
		}
	}
}
