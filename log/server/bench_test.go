package server

import (
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logtest"
)

// BenchmarkAppend appends 1,400-byte entries to a Pebble store through a
// sequencer: one appender back to back; one appender after 1.5 ms of
// idle before each append (a lone tool call's two entries come that far
// apart, and the first sync after idle costs more); and 32 appenders at
// once. ns/op is an append's mean latency for one appender (p50-ns its
// median), and the time per entry for 32.
func BenchmarkAppend(b *testing.B) {
	open := func(b *testing.B) *Sequencer {
		st, err := logpebble.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		signer, verifier := logtest.NewKey(b, "provlog.test/bench")
		seq, err := OpenSequencer(context.Background(), st, signer, verifier, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { seq.Close() })
		return seq
	}
	entry := func(i uint64) []byte {
		e := make([]byte, 1400)
		binary.BigEndian.PutUint64(e, i)
		return e
	}
	for _, idle := range []time.Duration{0, 1500 * time.Microsecond} {
		name := "one"
		if idle > 0 {
			name = "one-after-idle"
		}
		b.Run(name, func(b *testing.B) {
			seq := open(b)
			var i uint64
			var took []time.Duration
			for b.Loop() {
				if idle > 0 {
					b.StopTimer()
					time.Sleep(idle)
					b.StartTimer()
				}
				i++
				t0 := time.Now()
				if _, err := seq.Append(context.Background(), entry(i)); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2]), "p50-ns")
		})
	}
	b.Run("32", func(b *testing.B) {
		seq := open(b)
		b.SetParallelism(32 / max(1, runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			var i uint64
			for pb.Next() {
				i++
				if _, err := seq.Append(context.Background(), entry(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		st := seq.Stats()
		b.ReportMetric(float64(st.Appends)/float64(max(1, st.Commits)), "entries/commit")
	})
}
