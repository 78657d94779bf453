package proctest

import (
	"fmt"
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
