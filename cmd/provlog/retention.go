package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// Retention by age reads each entry once. An ageIndex holds, for every
// blob the log's entries name, the times of the oldest and the newest
// entry naming it, and a cursor: each purge by age reads only the entries
// appended since the last one, then judges the blobs in memory. A blob is
// purged by age when every entry naming it is older than the cut (one
// newer entry keeps it). The running sidecar keeps one index for its
// lifetime (the first purge after a start reads the log once); purge
// --data builds one for its single run.

// blobAge is when entries named one blob, oldest and newest (Unix ns).
type blobAge struct{ oldest, newest int64 }

// An ageIndex is the blobs entries [0, next) name, with their ages.
type ageIndex struct {
	mu   sync.Mutex
	next uint64
	ages map[string]blobAge
}

// pick reads entries [x.next, size) of src into the index and returns the
// blobs bs holds whose every naming entry is older than cut (sorted), and
// how many blobs older entries name that newer ones keep. The caller
// holds x.mu.
func (x *ageIndex) pick(ctx context.Context, src interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}, size uint64, cut time.Time, bs *blobs.Store) ([]string, int, error) {
	if x.ages == nil {
		x.ages = map[string]blobAge{}
	}
	for x.next < size {
		end := min(size, x.next+4096)
		es, err := src.Entries(ctx, x.next, end)
		if err != nil {
			return nil, 0, err
		}
		for _, b := range es {
			e, err := log.ParseEntry(b)
			if err != nil {
				continue // audit reports it; purging needs only what parses
			}
			if e.Kind == blobs.KindPurge {
				// A purge entry names blobs whose deletion it records:
				// they are forgotten, until a newer entry names one again.
				if pe, err := blobs.ParsePurge(e); err == nil {
					x.forget(pe.Blobs)
				}
				continue
			}
			t := e.Time.UnixNano()
			for _, s := range blobs.Refs(e) {
				a, ok := x.ages[s]
				if !ok {
					a = blobAge{t, t}
				}
				a.oldest, a.newest = min(a.oldest, t), max(a.newest, t)
				x.ages[s] = a
			}
		}
		x.next = end
	}
	c := cut.UnixNano()
	var out []string
	kept := 0
	for s, a := range x.ages {
		switch {
		case a.oldest >= c:
		case a.newest >= c:
			kept++
		default:
			// A blob the store lacks, or cannot say it holds, stays in
			// the index: only a purge entry forgets one, so a run with
			// the blobs' volume away purges it on the next.
			if ok, err := bs.Has(s); err == nil && ok {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out, kept, nil
}

// forget drops blobs a purge entry names from the index.
func (x *ageIndex) forget(purged []string) {
	for _, s := range purged {
		delete(x.ages, s)
	}
}

// ageOnly reports whether crit selects by age alone: retention, which
// keeps what newer entries still name (an erasure deletes wherever named).
func ageOnly(crit blobs.PurgeCriteria) bool {
	return !crit.Before.IsZero() && crit.Task == "" && crit.Actor == "" && len(crit.Blobs) == 0
}
