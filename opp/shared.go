package opp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
)

// Many sidecars. When other sidecars append to the same log (PostgreSQL),
// the engine's state in memory is only what this sidecar has read. So
// before it decides, the engine reads the entries others appended since it
// last looked and applies them, by the same rules Rebuild applies; then it
// checks the rules and appends fenced on the task id and the size it read
// up to (log.Fence), and an observed claim on each call it cites too
// (onetask.go): the store commits the entry only if no entry of that task,
// or citing such a call as observed, was committed since, by anyone. If one was, the engine reads again
// and decides again; the second decision usually refuses (the task was
// accepted elsewhere). Of many sidecars accepting one task at once,
// exactly one entry is written.
//
// Entries are applied in log order, each once: by the reader of others'
// entries or by the writer of its own, whichever comes first, under one
// lock.

// SharedLog is a [Log] other writers append to as well; a sequencer on a
// shared store is one.
type SharedLog interface {
	Log
	// Shared reports whether other writers append to the log.
	Shared() bool
	// AppendFenced appends entry only if no entry under f.Key was
	// committed at or after f.After; otherwise it fails with an error
	// wrapping log.ErrFenced and writes nothing.
	AppendFenced(ctx context.Context, entry []byte, f log.Fence) (*log.Receipt, error)
}

// maxFenced bounds how often one operation decides again after its append
// was fenced off. Each time, another writer committed an entry of the
// task first, so deciding again is progress, not a spin; the bound only
// keeps one operation from waiting for ever behind a busy task. At 16 a
// claim through one of two sidecars claiming on one task back to back
// was refused (a sidecar's operations come faster than another's
// catch-up and append); a random wait before deciding again made the
// loser lose more, since the winner does not wait.
const maxFenced = 64

type sharedLog struct {
	l    SharedLog
	mu   sync.Mutex // held while applying entries
	seen uint64     // entries [0, seen) are applied
}

// openShared notes whether the log has other writers; the engine has
// applied the entries [0, size).
func (e *Engine) openShared(size uint64) {
	if l, ok := e.log.(SharedLog); ok && l.Shared() {
		e.shared = &sharedLog{l: l, seen: size}
	}
}

// nothingWritten reports whether a failed append certainly wrote nothing
// (fenced off, or the store was unreachable), so the engine may go on.
func nothingWritten(err error) bool {
	return errors.Is(err, log.ErrFenced) || errors.Is(err, log.ErrUnavailable)
}

// append appends r's entry b, fenced on r's task, and on the calls it
// cites if it is an observed claim (onetask.go), when the log is shared.
func (e *Engine) append(ctx context.Context, r *record, b []byte) (*log.Receipt, error) {
	if e.shared == nil {
		return e.log.Append(ctx, b)
	}
	return e.shared.l.AppendFenced(ctx, b, log.Fence{Key: r.taskID, Also: callKeys(r), After: r.after})
}

// catchUp applies the entries appended since the engine last looked, and
// returns the size it has read up to.
func (e *Engine) catchUp(ctx context.Context) (uint64, error) {
	sh := e.shared
	size, err := sh.l.LatestSize(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the log's size: %w", err)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err := e.tasks.replay(ctx, sh.seen, size, func(n uint64) { sh.seen = n }); err != nil {
		return 0, err
	}
	return sh.seen, nil
}

// followCalls reads the calls appended since the engine last looked
// before an observed claim that cites evidence is judged, so that the
// rules see every call.result written before it (calls.go). On a shared
// log catchUp has read them, with everything else.
func (e *Engine) followCalls(ctx context.Context, r *record) error {
	if r.kind != KindClaim || r.provenance != Observed || len(r.evidence) == 0 {
		return nil
	}
	size, err := e.log.LatestSize(ctx)
	if err != nil {
		return fmt.Errorf("reading the log's size: %w", err)
	}
	return e.tasks.calls.follow(ctx, e.log, size)
}

// catchUpQuiet catches up before a read, if the log is shared.
func (e *Engine) catchUpQuiet(ctx context.Context) error {
	if e.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := e.catchUp(ctx)
	return err
}

// doShared runs an operation on an existing task of a shared log: read
// what others wrote, decide, append fenced; decide again if fenced off.
func (e *Engine) doShared(ctx context.Context, r *record) (*Result, error) {
	for attempt := 1; ; attempt++ {
		after, err := e.catchUp(ctx)
		if err != nil {
			return nil, err
		}
		t, unlock, err := e.task(ctx, r.taskID)
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, check(e.tasks.reader(ctx), nil, r, 0)
		}
		res, err := e.tryShared(ctx, t, r, after)
		unlock()
		if errors.Is(err, log.ErrFenced) && attempt < maxFenced {
			continue
		}
		return res, err
	}
}

// tryShared checks and writes r on task t, fenced at after; the caller
// holds t's operation lock. The reader of others' entries may apply to t
// meanwhile, so t is read under its mu.
func (e *Engine) tryShared(ctx context.Context, t *task, r *record, after uint64) (*Result, error) {
	t.mu.RLock()
	r.snapshot, r.prev = nil, new(t.head())
	if r.kind == KindHandoff && t.Owner == r.actor {
		r.snapshot = t.snapshot()
	}
	err := check(e.tasks.reader(ctx), t, r, 0)
	if err == nil {
		if perr := checkGrowth(t, r); perr != nil {
			err = perr
		}
	}
	t.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	r.after = after
	return e.writeChecked(ctx, t, r)
}
