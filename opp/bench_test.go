package opp_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/opp"
)

// BenchmarkOpsDistinctTasks measures task operations per second: 32
// goroutines each create, accept and report completion on tasks of their
// own, every operation durable in the log before it returns. The pebble
// variant syncs every group commit to disk in b.TempDir().
func BenchmarkOpsDistinctTasks(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) log.Storage
	}{
		{"pebble", func(b *testing.B) log.Storage {
			s, err := logpebble.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"memory", func(b *testing.B) log.Storage { return logtest.NewMemory() }},
	}
	for _, st := range stores {
		b.Run("store="+st.name, func(b *testing.B) {
			l := newLogOn(b, st.open(b))
			e := newEngine(b, l)
			const workers = 32
			var next atomic.Int64
			b.ResetTimer()
			t0 := time.Now()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					actor := "agent-" + string(rune('a'+w%26)) + string(rune('a'+w/26))
					for next.Add(1) <= int64(b.N) {
						r, err := e.Create(ctx, "creator", opp.CreateArgs{Title: "bench"})
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := e.Accept(ctx, actor, r.Task.ID); err != nil {
							b.Error(err)
							return
						}
						if _, err := e.ReportCompletion(ctx, actor, opp.ClaimArgs{TaskID: r.Task.ID, Provenance: "reviewed", Summary: "ok", Evidence: []uint64{r.Index}}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			b.ReportMetric(float64(3*b.N)/el.Seconds(), "ops/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkObservedClaim measures one observed claim, as an agent makes
// it: on a task it created and accepted, after one call and its result,
// citing the result. Calls alternate with a failed one, which the claim
// cites beside the one that succeeded.
func BenchmarkObservedClaim(b *testing.B) {
	l := newLog(b)
	e := newEngine(b, l)
	for b.Loop() {
		r, err := e.Create(ctx, "creator", opp.CreateArgs{Title: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Accept(ctx, "bob", r.Task.ID); err != nil {
			b.Fatal(err)
		}
		failed := appendCallStart(b, l, "bob")
		appendEntry(b, l, &log.CallResultEntry{Time: time.Now(), Actor: "bob", Call: failed, IsError: true, Error: "boom"})
		call := appendCallStart(b, l, "bob")
		res := appendCallResult(b, l, "bob", call)
		if _, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: r.Task.ID, Provenance: "observed", Summary: "ok", Evidence: []uint64{failed, res}}); err != nil {
			b.Fatal(err)
		}
	}
}
