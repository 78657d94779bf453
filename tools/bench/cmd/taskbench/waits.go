package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/pgstat"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// Where a status's time goes besides the engine's own work, on
// PostgreSQL: the hot loop's statuses each wait for one or more round
// trips to a backend, and on a shared machine both this process and the
// backend may wait for a CPU before they run, and the read's flush may
// wait for a WAL fsync. waits samples the counters of each before and
// after a loop.
type waits struct {
	cpu      time.Duration // this process's user+system CPU time
	selfWait time.Duration // this process's threads, runnable but not running
	pgWait   time.Duration // the database's backends and the WAL writer, the same
	pgPIDs   int
	walSyncs int64 // the cluster's WAL syncs (pg_stat_wal)
	walBytes int64
}

// sampleWaits reads the counters; dsn is the log's database ("" for
// Pebble: only this process's counters).
func sampleWaits(ctx context.Context, dsn string) (waits, error) {
	var w waits
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		w.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	w.selfWait = host.SelfSchedWait()
	if dsn == "" {
		return w, nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return w, err
	}
	defer conn.Close(ctx)
	pids, err := pgstat.RunPIDs(ctx, conn)
	if err != nil {
		return w, err
	}
	for _, pid := range pids {
		w.pgWait += host.SchedWait(fmt.Sprintf("/proc/%d/schedstat", pid))
	}
	w.pgPIDs = len(pids)
	err = conn.QueryRow(ctx, `SELECT wal_sync, wal_bytes::bigint FROM pg_stat_wal`).Scan(&w.walSyncs, &w.walBytes)
	return w, err
}

// describeWaits says what the n calls between a and b cost each.
func describeWaits(a, b waits, n int) string {
	d := time.Duration(max(1, n))
	s := fmt.Sprintf("per call: this process's CPU %s, its threads waiting for a CPU %s", dms((b.cpu-a.cpu)/d), dms((b.selfWait-a.selfWait)/d))
	if b.pgPIDs > 0 {
		s += fmt.Sprintf(", the database's backends and the WAL writer waiting for a CPU %s (%d processes), the cluster's WAL syncs %.3f and bytes %.0f",
			dms((b.pgWait-a.pgWait)/d), b.pgPIDs, float64(b.walSyncs-a.walSyncs)/float64(d), float64(b.walBytes-a.walBytes)/float64(d))
	}
	return s
}

func dms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
