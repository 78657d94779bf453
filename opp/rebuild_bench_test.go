package opp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

type sliceReader [][]byte

func (s sliceReader) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	return s[start:end], nil
}

// BenchmarkRebuildCalls: a rebuild over a log of 50,000 calls (1 KiB of
// arguments each) and their results, no tasks.
func BenchmarkRebuildCalls(b *testing.B) {
	var es sliceReader
	args := log.CanonicalJSON(`{"message":"` + strings.Repeat("x", 1000) + `"}`)
	g, _ := (&log.Entry{Kind: "genesis", Time: time.Now(), Actor: "a", Fields: map[string]any{}}).Marshal()
	es = append(es, g)
	for i := 0; i < 50000; i++ {
		c, err := (&log.CallEntry{Time: time.Now(), Actor: "bob", Server: "s", Tool: "echo", Args: args}).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		idx := uint64(len(es))
		es = append(es, c)
		r, err := (&log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: idx, ResultSHA256: strings.Repeat("ab", 32), ResultBytes: 10}).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		es = append(es, r)
	}
	for b.Loop() {
		if _, err := Rebuild(context.Background(), es, uint64(len(es))); err != nil {
			b.Fatal(err)
		}
	}
}
