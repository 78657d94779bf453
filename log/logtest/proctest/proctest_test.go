package proctest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestBufferLimit(t *testing.T) {
	b := &Buffer{Limit: 10}
	for _, s := range []string{"0123", "4567", "89ab", "cd"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if got, want := b.String(), "0123456789"; got != want {
		t.Fatalf("kept %q, want %q", got, want)
	}
}

func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("kept %d lines, want all 800", n)
	}
}

// TestProgram: a program an install script named is returned; a missing
// one skips the test (outside CI).
func TestProgram(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("PROVLOG_PROCTEST_PROGRAM", os.Args[0])
	t.Setenv("PROVLOG_PROCTEST_NONE", "")
	if got := Program(t, "PROVLOG_PROCTEST_PROGRAM", "install it"); got != os.Args[0] {
		t.Errorf("Program = %q; want %q", got, os.Args[0])
	}
	reached := false
	t.Run("missing", func(t *testing.T) {
		Program(t, "PROVLOG_PROCTEST_NONE", "install it")
		reached = true
	})
	if reached {
		t.Error("a missing program did not stop the test")
	}
}
