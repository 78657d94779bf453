//go:build unix

package logpebble

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// BenchmarkAppendCompaction appends b.N batches of 12 entries to a store
// with the sidecar's sizes (a 12 MiB cache, 2 MiB memtables:
// cmd/provlog/store.go) and reports, per entry, the process's CPU (the
// commits, and Pebble's flushes and compactions, waited for at the end)
// and the bytes Pebble flushed and compacted. The entries alternate
// between a call's size (1,400 bytes) and a result's (250), text as JSON
// is, so that Snappy gains on them about what it gains on real entries.
//
// The log only appends, so every byte a compaction writes is overhead,
// and it should not grow with the log. Run it at two sizes to see whether
// it does:
//
//	go test ./log/logpebble -run '^$' -bench AppendCompaction -benchtime 20000x   # 240,000 entries
//	go test ./log/logpebble -run '^$' -bench AppendCompaction -benchtime 60000x   # 720,000 entries
func BenchmarkAppendCompaction(b *testing.B) {
	s, err := Open(b.TempDir(), &Options{CacheSize: 12 << 20, MemTableSize: 2 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	a := newAppender()
	r := rand.New(rand.NewPCG(1, 2))
	const perBatch = 12
	entries := 0
	cpu := proctest.CPU()
	for b.Loop() {
		es := make([][]byte, perBatch)
		for j := range es {
			size := 250
			if j%2 == 0 {
				size = 1400
			}
			es[j] = textEntry(r, entries, size)
			entries++
		}
		if err := s.Commit(context.Background(), a.batch(es)); err != nil {
			b.Fatal(err)
		}
	}
	quiesce(b, s)
	used := proctest.CPU() - cpu
	m := s.db.Metrics()
	total := m.Total()
	n := float64(entries)
	b.ReportMetric(float64(used.Microseconds())/n, "cpu-µs/entry")
	b.ReportMetric(float64(m.Flush.WriteThroughput.Bytes)/n, "flushed-B/entry")
	b.ReportMetric(float64(total.TableBytesCompacted)/n, "compacted-B/entry")
}

// quiesce flushes s and waits for the compactions the flushes started,
// until none has run for a quarter of a second (Pebble leaves some debt
// below its L0 threshold unpaid for good).
func quiesce(b *testing.B, s *Store) {
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	for idle, deadline := 0, time.Now().Add(time.Minute); idle < 25 && time.Now().Before(deadline); {
		if s.db.Metrics().Compact.NumInProgress == 0 {
			idle++
		} else {
			idle = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// textEntry returns an entry of size bytes that names index i, padded
// with random lower-case words.
func textEntry(r *rand.Rand, i, size int) []byte {
	e := make([]byte, 0, size)
	e = append(e, `{"kind":"call","i":`...)
	e = strconv.AppendInt(e, int64(i), 10)
	e = append(e, `,"x":"`...)
	for len(e) < size-2 {
		v := r.Uint64()
		for k := 0; k < 7 && len(e) < size-2; k++ {
			e = append(e, 'a'+byte(v%26))
			v /= 26
		}
		e = append(e, ' ')
	}
	return append(e[:min(len(e), size-2)], '"', '}')
}
