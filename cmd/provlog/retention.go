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
// purged: a purge entry after every entry naming it names it, so it is
// due for deletion whatever its age, and no new purge entry is written
// for it (a deletion that failed, retried); the index forgets it once it
// is gone.
type blobAge struct {
	oldest, newest int64
	purged         bool
}

// An ageIndex is the blobs entries [0, next) name, with their ages.
type ageIndex struct {
	mu   sync.Mutex // held by each purge, whatever its criteria, from its plan to its end
	next uint64
	ages map[string]blobAge
}

// pick reads entries [x.next, size) of src into the index and returns the
// blobs bs holds whose every naming entry is older than cut (sorted), the
// blobs bs still holds that a purge entry already names (again: their
// deletion failed), and how many blobs older entries name that newer
// ones keep. The caller holds x.mu.
func (x *ageIndex) pick(ctx context.Context, src interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}, size uint64, cut time.Time, bs *blobs.Store) (out, again []string, kept int, err error) {
	if x.ages == nil {
		x.ages = map[string]blobAge{}
	}
	for x.next < size {
		end := min(size, x.next+4096)
		es, err := src.Entries(ctx, x.next, end)
		if err != nil {
			return nil, nil, 0, err
		}
		for _, b := range es {
			e, err := log.ParseEntry(b)
			if err != nil {
				continue // audit reports it; purging needs only what parses
			}
			if e.Kind == blobs.KindPurge {
				// A purge entry names blobs whose deletion it records:
				// due, until a newer entry names one again. One a
				// retention left, which an entry newer than its cut names
				// (Covers), is not due: its entries' ages still judge it.
				if pe, err := blobs.ParsePurge(e); err == nil {
					for _, s := range pe.Blobs {
						if a, ok := x.ages[s]; ok && !a.purged && !pe.Covers(time.Unix(0, a.newest)) {
							continue
						}
						x.ages[s] = blobAge{purged: true}
					}
				}
				continue
			}
			t := e.Time.UnixNano()
			for _, s := range blobs.Refs(e) {
				a, ok := x.ages[s]
				if !ok || a.purged {
					a = blobAge{oldest: t, newest: t}
				}
				a.oldest, a.newest = min(a.oldest, t), max(a.newest, t)
				x.ages[s] = a
			}
		}
		x.next = end
	}
	c := cut.UnixNano()
	for s, a := range x.ages {
		switch {
		case a.purged:
			// Gone, as its purge entry says: forgotten. Still there:
			// deleted again. Unknown: judged again next run.
			if ok, err := bs.Has(s); err == nil && ok {
				again = append(again, s)
			} else if err == nil {
				delete(x.ages, s)
			}
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
	slices.Sort(again)
	return out, again, kept, nil
}

// ageOnly reports whether crit selects by age alone: retention, which
// keeps what newer entries still name (an erasure deletes wherever named).
func ageOnly(crit blobs.PurgeCriteria) bool {
	return !crit.Before.IsZero() && crit.Task == "" && crit.Actor == "" && len(crit.Blobs) == 0
}
