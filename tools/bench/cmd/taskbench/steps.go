package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Where one get_task_status goes: the engine reads the newest state of a
// shared log first (LatestSize), applies what others appended since
// (Entries), and rebuilds a task not in its cache from its entries
// (Entries); the rest is its own work (locks, index, cache, the copy it
// returns). benchLog times its calls; the loop reads the sums around
// each status. It times only while on, so the build's appenders do not
// touch it.
type steps struct {
	on              atomic.Bool
	latest, entries atomic.Int64 // ns spent in each since the last take
	reads           atomic.Int64 // Entries calls
}

func (s *steps) time(sum *atomic.Int64, t0 time.Time) {
	if s.on.Load() {
		sum.Add(int64(time.Since(t0)))
		if sum == &s.entries {
			s.reads.Add(1)
		}
	}
}

// split is one call's time, by part.
type split struct{ total, latest, entries, rest time.Duration }

// take returns the split of a call of total that just ended, and starts
// the next.
func (s *steps) take(total time.Duration) split {
	l, e := time.Duration(s.latest.Swap(0)), time.Duration(s.entries.Swap(0))
	return split{total: total, latest: l, entries: e, rest: total - l - e}
}

// describeSplits gives the median of each part and the parts of the
// median call and of the slowest 1%.
func describeSplits(ss []split, reads int64) string {
	if len(ss) == 0 {
		return ""
	}
	med := func(f func(split) time.Duration) time.Duration {
		v := make([]time.Duration, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[(len(v)-1)/2]
	}
	byTotal := slices.Clone(ss)
	slices.SortFunc(byTotal, func(a, b split) int { return int(a.total - b.total) })
	tail := byTotal[(len(byTotal)-1)*99/100:]
	var t split
	for _, s := range tail {
		t.total, t.latest, t.entries, t.rest = t.total+s.total, t.latest+s.latest, t.entries+s.entries, t.rest+s.rest
	}
	n := time.Duration(len(tail))
	return fmt.Sprintf("medians: the whole call %s, reading the newest state %s, reading entries %s (%.2f reads a call), the rest %s; the slowest 1%%, mean: %s = %s + %s + %s",
		dms(med(func(s split) time.Duration { return s.total })), dms(med(func(s split) time.Duration { return s.latest })),
		dms(med(func(s split) time.Duration { return s.entries })), float64(reads)/float64(len(ss)), dms(med(func(s split) time.Duration { return s.rest })),
		dms(t.total/n), dms(t.latest/n), dms(t.entries/n), dms(t.rest/n))
}
