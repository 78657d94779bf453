package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/pgstat"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/tools/bench/internal/host"
)

// Where a receipt's latency goes, on PostgreSQL: the local sidecar's
// store reports each commit's parts (logpg.Options.OnCommit), and the
// latency phase matches each append of the local sidecar to the commit
// that ended within it (at one appender, one commit an append). The
// breakdown compares the median append with the slowest 1%.

// commitLog collects a store's commit times.
type commitLog struct {
	mu sync.Mutex
	ct []logpg.CommitTimes
}

func (l *commitLog) add(ct logpg.CommitTimes) {
	l.mu.Lock()
	l.ct = append(l.ct, ct)
	l.mu.Unlock()
}

// sample is one append as the latency phase timed it, with the GC cycles
// the process had completed at its start and end.
type sample struct {
	t0, t1   time.Time
	gc0, gc1 uint64
	local    bool // through the local sidecar (whose commits are logged)
}

var gcCycles = []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}

func gcCount() uint64 {
	s := []metrics.Sample{gcCycles[0]}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// parts is one append's latency split: the commit's parts and the rest
// (the sequencer's queue, the receipt's proof, the hand-off).
type parts struct {
	total, wait, lock, build, write, rest time.Duration
	gc                                    bool
}

// breakdown matches samples to commits and describes the median append
// and the slowest 1% of them.
func breakdown(samples []sample, cl *commitLog) string {
	cl.mu.Lock()
	cts := slices.Clone(cl.ct)
	cl.mu.Unlock()
	slices.SortFunc(cts, func(a, b logpg.CommitTimes) int { return a.End.Compare(b.End) })
	var ps []parts
	for _, s := range samples {
		if !s.local {
			continue
		}
		i, _ := slices.BinarySearchFunc(cts, s.t0, func(c logpg.CommitTimes, t time.Time) int { return c.End.Compare(t) })
		if i >= len(cts) || cts[i].End.After(s.t1) {
			continue // no commit of its own (another's covered it)
		}
		c := cts[i]
		p := parts{total: s.t1.Sub(s.t0), wait: c.Wait, lock: c.Lock, build: c.Build, write: c.Write, gc: s.gc1 != s.gc0}
		p.rest = p.total - c.Wait - c.Lock - c.Build - c.Write
		ps = append(ps, p)
	}
	if len(ps) < 100 {
		return fmt.Sprintf("breakdown: %d appends matched to commits, too few", len(ps))
	}
	slices.SortFunc(ps, func(a, b parts) int { return int(a.total - b.total) })
	tail := ps[len(ps)*99/100:]
	med := func(ps []parts, f func(parts) time.Duration) string {
		v := make([]time.Duration, len(ps))
		for i, p := range ps {
			v[i] = f(p)
		}
		slices.Sort(v)
		return dms(v[len(v)/2])
	}
	desc := func(ps []parts) string {
		gc := 0
		for _, p := range ps {
			if p.gc {
				gc++
			}
		}
		return fmt.Sprintf("total %s = wait %s + round trip 1 %s + build %s + round trip 2 %s + rest %s; GC during %d of %d",
			med(ps, func(p parts) time.Duration { return p.total }), med(ps, func(p parts) time.Duration { return p.wait }),
			med(ps, func(p parts) time.Duration { return p.lock }), med(ps, func(p parts) time.Duration { return p.build }),
			med(ps, func(p parts) time.Duration { return p.write }), med(ps, func(p parts) time.Duration { return p.rest }), gc, len(ps))
	}
	// The slowest few, each.
	var worst []string
	for _, p := range ps[max(0, len(ps)-5):] {
		worst = append(worst, fmt.Sprintf("%s (%s/%s/%s/%s/%s)", dms(p.total), dms(p.wait), dms(p.lock), dms(p.build), dms(p.write), dms(p.rest)))
	}
	return fmt.Sprintf("medians of %d local appends: %s; of the slowest 1%%: %s; the 5 slowest (wait/rt1/build/rt2/rest): %s",
		len(ps), desc(ps), desc(tail), strings.Join(worst, ", "))
}

// walStats is the cluster's WAL activity (pg_stat_wal; the sync time
// counts only with track_wal_io_timing on), its checkpoints, and the
// autovacuum runs on the run's tables.
type walStats struct {
	bytes, fpi, syncs, checkpoints, autovacuums int64
	syncMS                                      float64
}

func (p *pgImpl) walStats(ctx context.Context) (walStats, error) {
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return walStats{}, err
	}
	defer conn.Close(ctx)
	var w walStats
	err = conn.QueryRow(ctx, `SELECT wal_bytes::bigint, wal_fpi, wal_sync, wal_sync_time,
		(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),
		(SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint FROM pg_stat_all_tables WHERE schemaname = $1)
		FROM pg_stat_wal`, p.schema).Scan(&w.bytes, &w.fpi, &w.syncs, &w.syncMS, &w.checkpoints, &w.autovacuums)
	return w, err
}

// describeWAL says what the cluster's WAL did between a and b, for n
// commits (of every sidecar).
func describeWAL(a, b walStats, commits int) string {
	if commits == 0 {
		return ""
	}
	n := float64(commits)
	sync := "sync time not tracked"
	if d := b.syncMS - a.syncMS; d > 0 {
		sync = fmt.Sprintf("%.3f ms a sync", d/float64(max(1, b.syncs-a.syncs)))
	}
	return fmt.Sprintf("WAL, cluster-wide, per commit: %.0f B, %.2f full-page images, %.2f syncs (%s); %d checkpoints, %d autovacuum/analyze runs on the log's tables",
		float64(b.bytes-a.bytes)/n, float64(b.fpi-a.fpi)/n, float64(b.syncs-a.syncs)/n, sync, b.checkpoints-a.checkpoints, b.autovacuums-a.autovacuums)
}

// cpuWaits is schedWait of every process, by pid, and of this process's
// threads together (pid 0).
func cpuWaits() map[int]time.Duration {
	w := map[int]time.Duration{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			w[pid] = host.SchedWait(p + "/schedstat")
		}
	}
	w[0] = host.SelfSchedWait()
	return w
}

// runPIDs returns the pids of the backends serving this run (every other
// client of its database: one run at a time uses it) and of the WAL
// writer.
func (p *pgImpl) runPIDs(ctx context.Context) ([]int, error) {
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	return pgstat.RunPIDs(ctx, conn)
}

// describeCPUWait says how long, per append, this run's backends and the
// WAL writer, and this process, waited for a CPU between a and b.
func describeCPUWait(a, b map[int]time.Duration, pids []int, n int) string {
	var pg time.Duration
	for _, pid := range pids {
		pg += b[pid] - a[pid]
	}
	n = max(1, n)
	return fmt.Sprintf("waiting for a CPU, per append: the run's PostgreSQL backends and WAL writer %s (%d processes), this process %s",
		dms(pg/time.Duration(n)), len(pids), dms((b[0]-a[0])/time.Duration(n)))
}

func dms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
