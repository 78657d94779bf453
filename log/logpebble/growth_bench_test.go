//go:build linux

package logpebble

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// BenchmarkGrowth grows a store with the sidecar's sizes (cmd/provlog/
// store.go) by b.N batches of 16 entries of 1 to 2 KB, and at 250,000
// entries, then at every doubling from a million, stops and logs what a
// store that runs for months must not let grow without bound: tables per
// level (how many, median size, how many start with each kind of key),
// the process's open files, the MANIFEST, the time to reopen the store,
// memory, the latency of random reads after the reopen, and the CPU and
// compaction of the appends since the last stop. At the end it reports
// the last stop's numbers. A run to 4 million entries (about 6 GB on disk,
// 8 minutes):
//
//	go test ./log/logpebble -run '^$' -bench Growth -benchtime 250000x -timeout 1h
//
// The log's keys are appended in order, so most tables Pebble flushes
// move down whole (keys.go), and the tables grow with the log: about one
// per 1,000 entries (at 4 million: 4,566, of which 2,317 entries tables of
// 1.5 MB, 1,393 checkpoint tables of a few KB, 485 node tables of 1 KB
// waiting in level 0). Measured in December 2026 on 2 shared cores, that
// costs little, and nothing that grows past a bound that hurts:
//   - open files stay at Pebble's MaxOpenFiles (1,000; 1,009 with the
//     WAL and others) from a million entries on: Pebble opens every table
//     when it opens, to collect table statistics, and keeps 990 of them
//     open. Go raises the soft limit on open files to the hard one when a
//     program starts, so only a hard limit near 1,024 would be reached;
//   - the MANIFEST grows 0.4 KiB a table (1.8 MiB at 4 million) and the
//     Go heap some 0.6 KiB (Pebble's table metadata; an open table costs
//     some 2.4 KiB more, but at most 990 are open);
//   - Open took 0.2 s at 250,000 entries and 0.9 to 1.7 s at 4 million,
//     but 70% of its CPU was loadHot reading the 2^17 upper nodes, which
//     grows with the log, not with its tables (loadHot since reads each
//     block once, which halved Open at a million entries: BenchmarkOpen;
//     not measured again here);
//   - a random entry read took 18 to 25 µs up to a million entries, and 75
//     to 150 µs at 4 million, where 46% of table look-ups found the table
//     open. With every table kept open it took 31 to 40 µs, for 20 MiB
//     more RSS and 4,740 open files. A proof's nodes took 14 to 22 µs up
//     to a million entries, 34 to 59 at 4 million (26 to 33 with every
//     table open); a tile 107 to 300 µs throughout.
//
// So the tables are left to grow; a periodic compaction could merge them
// only at the cost of rewriting every entry once more (Pebble's manual
// compaction never rewrites the bottom level alone).
func BenchmarkGrowth(b *testing.B) {
	dir := b.TempDir()
	opts := &Options{CacheSize: 12 << 20, MemTableSize: 2 << 20}
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { s.Close() }()
	a := newAppender()
	r := rand.New(rand.NewPCG(3, 4))
	const perBatch = 16
	g := growth{b: b, dir: dir, opts: opts, cpu: proctest.CPU()}
	next := 250_000
	entries := 0
	for b.Loop() {
		es := make([][]byte, perBatch)
		for j := range es {
			es[j] = textEntry(r, entries, 1000+r.IntN(1001))
			entries++
		}
		if err := s.Commit(context.Background(), a.batch(es)); err != nil {
			b.Fatal(err)
		}
		if entries >= next {
			b.StopTimer()
			s = g.stop(s, entries)
			next = max(2*next, 1_000_000)
			b.StartTimer()
		}
	}
	quiesce(b, s)
	b.ReportMetric(float64(s.db.Metrics().Total().TablesCount)*1000/float64(entries), "tables/1000entries")
	if g.entries > 0 {
		b.ReportMetric(float64(g.fds), "fds")
		b.ReportMetric(g.open.Seconds(), "open-s")
		b.ReportMetric(float64(g.entryRead.Nanoseconds())/1e3, "entry-read-µs")
	}
}

// growth is what BenchmarkGrowth carries from one stop to the next.
type growth struct {
	b         *testing.B
	dir       string
	opts      *Options
	cpu       time.Duration // the process's CPU at the last stop's end
	entries   int
	compacted uint64
	// At the last stop, after reopening: open files, the time Open took,
	// and the mean latency of a random entry read.
	fds       int
	open      time.Duration
	entryRead time.Duration
}

// stop measures s at size n, reopening it, and returns the reopened store.
func (g *growth) stop(s *Store, n int) *Store {
	b := g.b
	quiesce(b, s)
	used := proctest.CPU() - g.cpu
	m := s.db.Metrics()
	compacted := m.Total().TableBytesCompacted
	d := float64(n - g.entries)
	b.Logf("%d entries: tables %d [%s], %.2f/1000 entries; MANIFEST %d KiB; fds %d; anon RSS %d MiB, Go heap %d MiB; file cache %d tables %d KiB; block cache %d KiB; since last: %.1f cpu-µs/entry, %.0f compacted-B/entry",
		n, m.Total().TablesCount, tableSummary(b, s), float64(m.Total().TablesCount)*1000/float64(n),
		manifestSize(b, g.dir)>>10, openFDs(b), rss(b)>>20, goHeap()>>20,
		m.FileCache.TableCount, m.FileCache.Size>>10, m.BlockCache.Size>>10,
		float64(used.Microseconds())/d, float64(compacted-g.compacted)/d)
	g.entries, g.compacted = n, compacted

	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	start := time.Now()
	s, err := Open(g.dir, g.opts)
	if err != nil {
		b.Fatal(err)
	}
	opened := time.Since(start)
	fds := openFDs(b)
	entry, nodes, tile := readLatencies(b, s)
	m = s.db.Metrics()
	b.Logf("%d entries reopened: Open %v, fds %d; random reads (mean, p99): entry %v %v, proof %v %v, tile %v %v; then fds %d, anon RSS %d MiB, Go heap %d MiB, file cache %d tables %d KiB",
		n, opened.Round(time.Millisecond), fds, entry[0], entry[1], nodes[0], nodes[1], tile[0], tile[1],
		openFDs(b), rss(b)>>20, goHeap()>>20, m.FileCache.TableCount, m.FileCache.Size>>10)
	g.fds, g.open, g.entryRead = fds, opened, entry[0]
	g.cpu = proctest.CPU()
	return s
}

// tableSummary describes the tables of each level: how many, their median
// size, and how many start with each kind of key.
func tableSummary(b *testing.B, s *Store) string {
	levels, err := s.db.SSTables()
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for i, ts := range levels {
		if len(ts) == 0 {
			continue
		}
		sizes := make([]uint64, len(ts))
		kinds := map[byte]int{}
		for k, t := range ts {
			sizes[k] = t.Size
			kinds[t.Smallest.UserKey[0]]++
		}
		slices.Sort(sizes)
		l := fmt.Sprintf("L%d=%d median %d KiB", i, len(ts), sizes[len(sizes)/2]>>10)
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			l += fmt.Sprintf(" %c:%d", k, kinds[k])
		}
		out = append(out, l)
	}
	return strings.Join(out, "; ")
}

// readLatencies reads 2,000 random entries, inclusion proofs' nodes and
// level-0 tiles from s, and returns the mean and 99th percentile of each.
func readLatencies(b *testing.B, s *Store) (entry, nodes, tile [2]time.Duration) {
	ctx := context.Background()
	size := s.state.Size
	r := rand.New(rand.NewPCG(5, 6))
	const n = 2000
	measure := func(read func(i uint64) error) [2]time.Duration {
		ds := make([]time.Duration, n)
		var sum time.Duration
		for k := range ds {
			i := r.Uint64N(size)
			start := time.Now()
			if err := read(i); err != nil {
				b.Fatal(err)
			}
			ds[k] = time.Since(start)
			sum += ds[k]
		}
		slices.Sort(ds)
		return [2]time.Duration{(sum / n).Round(100 * time.Nanosecond), ds[n*99/100].Round(time.Microsecond)}
	}
	entry = measure(func(i uint64) error {
		_, err := s.Entries(ctx, i, i+1)
		return err
	})
	nodes = measure(func(i uint64) error {
		p, err := proof.Inclusion(i, size)
		if err != nil {
			return err
		}
		_, err = s.ReadNodes(ctx, append(p.IDs, compact.NewNodeID(0, i)))
		return err
	})
	ids := make([]compact.NodeID, 256)
	tile = measure(func(i uint64) error {
		t := i / 256
		if (t+1)*256 > size {
			t--
		}
		for k := range ids {
			ids[k] = compact.NewNodeID(0, t*256+uint64(k))
		}
		_, err := s.ReadNodes(ctx, ids)
		return err
	})
	return entry, nodes, tile
}

// manifestSize is the size of the MANIFEST files in dir.
func manifestSize(b *testing.B, dir string) int64 {
	ms, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, m := range ms {
		fi, err := os.Stat(m)
		if err != nil {
			b.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// openFDs is the number of files the process has open.
func openFDs(b *testing.B) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(fds) - 1 // ReadDir's own
}

// rss is the process's anonymous resident memory in bytes (its heaps, not
// the mapped binary).
func rss(b *testing.B) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(st) {
		if v, ok := bytes.CutPrefix(line, []byte("RssAnon:")); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(v)), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no RssAnon in /proc/self/status")
	return 0
}

func goHeap() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
