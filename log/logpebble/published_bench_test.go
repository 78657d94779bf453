package logpebble

import (
	"context"
	"fmt"
	"testing"

	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// BenchmarkPublishedRecord measures what the published-batch record costs
// an append: the same sequencer and store, with the record written beside
// every commit (as always) and, for comparison only, without it. One
// appender makes one-entry commits (fsync-bound); 64 make commits of ~30.
func BenchmarkPublishedRecord(b *testing.B) {
	signer, v := logtest.NewKey(b, "faults.example/log")
	for _, w := range []int{1, 64} {
		for _, rec := range []bool{true, false} {
			b.Run(fmt.Sprintf("appenders=%d/record=%v", w, rec), func(b *testing.B) {
				s, err := Open(b.TempDir(), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if !rec {
					s.pub.close()
					s.pub = nil
				}
				seq, err := server.OpenSequencer(context.Background(), s, signer, v, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer seq.Close()
				e := testEntry("bench", 0)
				b.SetParallelism(w)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						e := append([]byte(nil), e...)
						e[len(e)-3] = byte(i) // unique enough; the store does not dedup
						i++
						if _, err := seq.Append(context.Background(), e); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
