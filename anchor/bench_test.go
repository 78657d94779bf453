package anchor_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
)

// BenchmarkAppend measures append throughput on a Pebble log (Sync
// commits, 16 appenders per CPU) with no anchoring and with anchoring every
// second: two TSAs and a Rekor, all in this process on loopback, so their
// CPU counts against the appends. Anchoring runs beside the sequencer, so
// the two should be within noise. Run with -benchtime=10s -count=6 so
// several anchors fall into each measurement; the anchors column is how
// many were made.
func BenchmarkAppend(b *testing.B) {
	for _, interval := range []time.Duration{0, time.Second} {
		name := "anchoring=off"
		if interval > 0 {
			name = fmt.Sprintf("anchoring=%v", interval)
		}
		b.Run(name, func(b *testing.B) {
			store, err := logpebble.Open(filepath.Join(b.TempDir(), "db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			seq, _, key := newLog(b, store)
			var records *anchor.Store
			if interval > 0 {
				e := newEnv(b, 2, true)
				e.resolved.Interval = interval
				if records, err = anchor.OpenStore(filepath.Join(b.TempDir(), "anchors")); err != nil {
					b.Fatal(err)
				}
				e.records, e.seq, e.key = records, seq, key
				runner := e.runner(func(o *online.Options) { o.Tree = store })
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go runner.Run(ctx)
			}
			entry := echoEntry(b)
			var failed atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := seq.Append(context.Background(), entry); err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d appends failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			if records != nil {
				names, _ := records.Names()
				b.ReportMetric(float64(len(names)), "anchors")
			}
		})
	}
}

// BenchmarkAppendAlternating is the fair comparison on a busy machine:
// one Pebble log, 16 appenders per CPU, and anchoring switched on and off
// every second, so that both phases see the same background load. An
// on-phase starts the runner, which anchors at once: one anchor per
// on-second, which is anchoring every second. It reports the append rate of each phase and their
// ratio (on/off; 1 means no cost). Run it long, for example
// -benchtime=2000000x.
func BenchmarkAppendAlternating(b *testing.B) {
	store, err := logpebble.Open(filepath.Join(b.TempDir(), "db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	seq, _, key := newLog(b, store)
	e := newEnv(b, 2, true)
	e.resolved.Interval = time.Second
	if e.records, err = anchor.OpenStore(filepath.Join(b.TempDir(), "anchors")); err != nil {
		b.Fatal(err)
	}
	e.seq, e.key = seq, key
	runner := e.runner(func(o *online.Options) { o.Tree = store })
	entry := echoEntry(b)

	var (
		phase    atomic.Int32 // 0 off, 1 on
		counts   [2]atomic.Int64
		elapsed  [2]time.Duration
		next     atomic.Int64
		failed   atomic.Int64
		done     = make(chan struct{})
		finished = make(chan struct{})
	)
	go func() { // the phase switch
		defer close(finished)
		for p := 0; ; p = 1 - p {
			var stop func()
			if p == 1 {
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan struct{})
				go func() { runner.Run(ctx); close(ran) }()
				stop = func() { cancel(); <-ran }
			}
			phase.Store(int32(p))
			t0 := time.Now()
			select {
			case <-time.After(time.Second):
			case <-done:
			}
			elapsed[p] += time.Since(t0)
			if stop != nil {
				stop()
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 16 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				p := phase.Load()
				if _, err := seq.Append(context.Background(), entry); err != nil {
					failed.Add(1)
				}
				counts[p].Add(1)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(done)
	<-finished
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d appends failed", n)
	}
	if elapsed[0] > 0 && elapsed[1] > 0 && counts[0].Load() > 0 {
		off := float64(counts[0].Load()) / elapsed[0].Seconds()
		on := float64(counts[1].Load()) / elapsed[1].Seconds()
		names, _ := e.records.Names()
		b.ReportMetric(off, "off-appends/s")
		b.ReportMetric(on, "on-appends/s")
		b.ReportMetric(on/off, "on/off")
		b.ReportMetric(float64(len(names)), "anchors")
	}
}

// BenchmarkCoveredTimes measures what provlog evidence adds to check an
// anchor at size 100,000 against the entries it covers: one read of
// every entry of a Pebble log below that size, keeping the latest time.
func BenchmarkCoveredTimes(b *testing.B) {
	const size = 100_000
	store, err := logpebble.Open(filepath.Join(b.TempDir(), "db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	seq, _, _ := newLog(b, store)
	entry := echoEntry(b)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for next.Add(1) < size {
				if _, err := seq.Append(context.Background(), entry); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	ctx := context.Background()
	for b.Loop() {
		e, err := anchor.NewCoveredTimes(store).Newest(ctx, size)
		if err != nil || e.Index == 0 {
			b.Fatal(e, err)
		}
	}
	b.ReportMetric(float64(size), "entries")
}

// echoEntry is the call entry the benchmarks append.
func echoEntry(b *testing.B) []byte {
	b.Helper()
	entry, err := (&log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "bench", Fields: map[string]any{
		"server": "everything", "tool": "echo", "args": map[string]any{"message": "hello"},
	}}).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return entry
}
