package server

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
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
// one-after-idle also reports the disk's floor beside it, measured between
// its appends: raw-sync-p50-ns, the median of a 2 KiB write appended to a
// file in a directory of its own and fsync'ed, also after 1.5 ms of idle
// (a lone entry's Pebble batch is some 1.9 KiB). p50-ns less that is what
// the log adds to a sync.
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
			var raw *os.File
			if idle > 0 {
				f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { f.Close() })
				raw = f
			}
			var i uint64
			var took, floor []time.Duration
			rec := make([]byte, 2048)
			for b.Loop() {
				if idle > 0 {
					b.StopTimer()
					time.Sleep(idle)
					t0 := time.Now()
					if _, err := raw.Write(rec); err != nil {
						b.Fatal(err)
					}
					if err := raw.Sync(); err != nil {
						b.Fatal(err)
					}
					floor = append(floor, time.Since(t0))
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
			if len(floor) > 0 {
				slices.Sort(floor)
				b.ReportMetric(float64(floor[len(floor)/2]), "raw-sync-p50-ns")
			}
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

// BenchmarkCall makes the proxy's two appends per tool call against a
// Pebble store through a sequencer with the default commit delay: an
// append of the call entry, then, as the proxy announces the result's
// append once the call entry is written, Expect and the Expected's
// Append of the result entry (600 bytes each). 1, 8 and 32 callers loop
// at once. ns/op is the time per call (for one caller, a call's latency:
// two commits), cpu-ns/op the process's CPU per call and appends/commit
// the sequencer's batching, which sets both under load: each commit is an
// fdatasync and a signature whatever it carries.
func BenchmarkCall(b *testing.B) {
	entry := func(kind byte, i uint64) []byte {
		e := make([]byte, 600)
		e[0] = kind
		binary.BigEndian.PutUint64(e[1:], i)
		return e
	}
	for _, n := range []int{1, 8, 32} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			st, err := logpebble.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			signer, verifier := logtest.NewKey(b, "provlog.test/bench")
			seq, err := OpenSequencer(context.Background(), st, signer, verifier, &SequencerOptions{CommitDelay: DefaultCommitDelay})
			if err != nil {
				b.Fatal(err)
			}
			defer seq.Close()
			b.ReportAllocs()
			cpu := proctest.CPU()
			var next atomic.Uint64
			b.SetParallelism(max(1, n/runtime.GOMAXPROCS(0)))
			if n == 1 {
				b.SetParallelism(1)
			}
			b.ResetTimer()
			call := func() error {
				i := next.Add(1)
				if _, err := seq.Append(context.Background(), entry('c', i)); err != nil {
					return err
				}
				ex := seq.Expect()
				defer ex.Cancel()
				_, err := ex.Append(context.Background(), entry('r', i))
				return err
			}
			if n == 1 {
				for b.Loop() {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := call(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(proctest.CPU()-cpu)/float64(b.N), "cpu-ns/op")
			s := seq.Stats()
			b.ReportMetric(float64(s.Appends)/float64(max(1, s.Commits)), "appends/commit")
		})
	}
}
