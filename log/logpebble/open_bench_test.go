package logpebble

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkOpen reopens a store of a million entries, with the sidecar's
// sizes (cmd/provlog/store.go), and reports the time Open took and, on the
// opened store, the time loadHot alone takes (most of Open's CPU was
// loadHot: BenchmarkGrowth). Building the store takes a minute or two:
//
//	go test ./log/logpebble -run '^$' -bench '^BenchmarkOpen$' -benchtime 5x
func BenchmarkOpen(b *testing.B) {
	const entries, perBatch = 1 << 20, 256
	dir := b.TempDir()
	opts := &Options{CacheSize: 12 << 20, MemTableSize: 2 << 20}
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, newAppender(), entries/perBatch, perBatch, 64)
	quiesce(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var open, load time.Duration
	for b.Loop() {
		runtime.GC()
		start := time.Now()
		s, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		start = time.Now()
		if _, err := loadHot(s.r, entries, s.hot.Max()); err != nil {
			b.Fatal(err)
		}
		load += time.Since(start)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(open.Seconds()*1e3/float64(b.N), "open-ms")
	b.ReportMetric(load.Seconds()*1e3/float64(b.N), "loadhot-ms")
}
