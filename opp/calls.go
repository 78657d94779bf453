package opp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/provlog/provlog/log"
)

// An observed claim may cite a call only once the call's call.result is
// in the log before the claim: the proxy writes a call.result before the
// client sees the outcome (DESIGN §2), so an agent cannot have observed
// the outcome of a call whose result the log does not hold yet. A
// call.result names its call, not the other way round, so finding a
// call's result would mean reading the log after the call. Instead the
// engine follows the log's calls as it reads the log (log.CallTracker):
// it knows which calls have no result yet, at most the calls under way
// and those cut off, never every call. Rebuilding reads every entry
// anyway, and the engine reads what was appended since it last looked
// before it judges an observed claim, each entry once; a claim then
// reads nothing more per citation. It also keeps the calls whose
// call.result reports a failure (succeeded.go), in order: 8 bytes a failed
// call. Both are saved with the task index (snapshot.go).
type callSet struct {
	mu   sync.Mutex
	seen uint64 // the entries [0, seen) were read
	t    log.CallTracker
	// fails are the calls whose call.result has is_error or an error,
	// ascending.
	fails []uint64
}

// add reads entry i (bytes b), the next one, and skips an entry read
// before. It reads the entry's bytes (log.CallTracker.AddBytes: only the
// members that pair calls with results, no decoding). A call or
// call.result that breaks the log's rules (log.Audit reports it) changes
// nothing: a result that does not end an open call of its actor leaves
// that call without a result.
func (c *callSet) add(i uint64, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(i, b)
}

// pass reads the entries [start, stop) as {}, which hold no call: the
// entries a SparseReader does not hold.
func (c *callSet) pass(start, stop uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == start {
		c.seen = stop
	}
}

func (c *callSet) addLocked(i uint64, b []byte) {
	if i != c.seen {
		return
	}
	c.seen++
	calls := c.t.Calls()
	if c.t.AddBytes(i, b) != nil {
		return // log.Audit's to report; nothing changed
	}
	if c.t.Calls() != calls {
		return // a call, whose arguments may be large: not a result
	}
	if call, ok := failure(b); ok {
		if k, found := slices.BinarySearch(c.fails, call); !found {
			c.fails = slices.Insert(c.fails, k, call)
		}
	}
}

// failure reports whether b, an entry the tracker took, is a call.result
// reporting a failure, and names its call. Most results succeed, so it
// decodes only those that carry a failure's members; the tracker took
// the result, so it ended an open call of its actor.
func failure(b []byte) (call uint64, ok bool) {
	if !bytes.Contains(b, []byte(`"is_error":true`)) && !bytes.Contains(b, []byte(`"error":`)) {
		return 0, false
	}
	e, err := log.ParseEntry(b)
	if err != nil || e.Kind != log.KindCallResult {
		return 0, false
	}
	res, err := log.ParseCallResult(e)
	if err != nil || !res.IsError && res.Error == "" {
		return 0, false
	}
	return res.Call, true
}

// failed reports whether call i's call.result, among the entries read,
// reports a failure.
func (c *callSet) failed(i uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, found := slices.BinarySearch(c.fails, i)
	return found
}

// follow reads the entries [seen, size) of r.
func (c *callSet) follow(ctx context.Context, r EntryReader, size uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.seen < size {
		start := c.seen
		stop := min(size, start+rebuildChunk)
		es, err := r.Entries(ctx, start, stop)
		if err == nil && uint64(len(es)) != stop-start {
			err = fmt.Errorf("got %d", len(es))
		}
		if err != nil {
			return fmt.Errorf("reading entries [%d, %d) for their calls: %w", start, stop, err)
		}
		for k, b := range es {
			c.addLocked(start+uint64(k), b)
		}
	}
	return nil
}

// read returns how many entries were read: the calls and results among
// [0, read) are known.
func (c *callSet) read() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen
}

// open reports whether call i had no call.result in the entries read.
func (c *callSet) open(i uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.IsOpen(i)
}

// state returns the entries read, the calls among them without a result
// and those whose result failed, for a snapshot.
func (c *callSet) state() (seen uint64, open, fails []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen, c.t.Open(), slices.Clone(c.fails)
}

// restore makes c what a snapshot of the entries [0, size) saved: open
// are the calls without a result, read back by rd (a few: those under
// way and those cut off); fails, the calls whose result failed.
func (c *callSet) restore(rd reader, size uint64, open, fails []uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t, c.seen, c.fails = log.CallTracker{}, size, fails
	for _, i := range open {
		b, err := rd.entry(i)
		if err != nil {
			return fmt.Errorf("reading call %d: %w", i, err)
		}
		err = c.t.AddBytes(i, b)
		if err == nil && !c.t.IsOpen(i) {
			err = errors.New("it is not a call awaiting its result")
		}
		if err != nil {
			return fmt.Errorf("call %d of the saved index: %w", i, err)
		}
	}
	return nil
}
