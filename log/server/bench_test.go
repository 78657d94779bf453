package server

import (
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// BenchmarkAppend appends 1,400-byte entries to a Pebble store through a
// sequencer: one appender back to back; one appender after 1.5 ms of
// idle before each append (a lone tool call's two entries come that far
// apart, and the first sync after idle costs more); and 4, 16, 32 and 64
// appenders at once. ns/op is an append's mean latency for one appender
// (p50-ns its median), and the time per entry for many. cpu-ns/op, the
// process's CPU per entry, falls as entries per commit rise: a commit's
// own cost (its fdatasync, its checkpoint's signature, Pebble's commit)
// is shared by the entries it carries (tools/bench/README.md, session 19).
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
	for _, n := range []int{4, 16, 32, 64} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			seq := open(b)
			cpu := proctest.CPU()
			b.SetParallelism(max(1, n/runtime.GOMAXPROCS(0)))
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
			b.ReportMetric(float64(proctest.CPU()-cpu)/float64(b.N), "cpu-ns/op")
			st := seq.Stats()
			b.ReportMetric(float64(st.Appends)/float64(max(1, st.Commits)), "entries/commit")
		})
	}
}
