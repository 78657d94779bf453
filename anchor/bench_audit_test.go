package anchor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// BenchmarkAuditAll is the anchor audit of a log of about 100,000 call
// entries anchored every 10,000 by two TSAs and a Rekor: the records
// verified, and the one pass over every entry (anchor entries compared
// with the records, entry times with the anchors' times). The log is
// in memory, so reading it costs little and the pass's own work shows.
func BenchmarkAuditAll(b *testing.B) {
	e := newEnv(b, 2, true)
	r := e.runner(nil)
	ctx := context.Background()
	const total, every, writers = 100_000, 10_000, 16
	for done := 0; done < total; done += every {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < every; i += writers {
					entry, err := (&log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "bench", Fields: map[string]any{
						"server": "everything", "tool": "echo", "args": map[string]any{"message": fmt.Sprint("hello ", done+i)},
						"tool_sha256": "5e1d2c0c4b8f1d5e8a1b6c9d3f7a2e4b0c8d1f3a5b7c9e2d4f6a8b0c1d3e5f7a",
					}}).Marshal()
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := e.seq.Append(ctx, entry); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if _, err := r.AnchorNow(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := e.audit()
		if err != nil {
			b.Fatal(err)
		}
		if rep.Verified != total/every {
			b.Fatalf("%d records verified", rep.Verified)
		}
	}
	b.ReportMetric(float64(e.size()), "entries")
}
