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
// up to (log.Fence): the store commits the entry only if no entry of that
// task was committed since, by anyone. If one was, the engine reads again
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
	// LatestSize returns the size of the log as last committed by any
	// writer.
	LatestSize(ctx context.Context) (uint64, error)
}

// maxFenced bounds how often one operation decides again after its append
// was fenced off.
const maxFenced = 16

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

// append appends r's entry b, fenced on r's task when the log is shared.
func (e *Engine) append(ctx context.Context, r *record, b []byte) (*log.Receipt, error) {
	if e.shared == nil {
		return e.log.Append(ctx, b)
	}
	return e.shared.l.AppendFenced(ctx, b, log.Fence{Key: r.taskID, After: r.after})
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
	rd := reader{ctx, e.log}
	for start := sh.seen; start < size; {
		end := min(size, start+rebuildChunk)
		es, err := e.log.Entries(ctx, start, end)
		if err != nil {
			return 0, fmt.Errorf("reading entries [%d, %d): %w", start, end, err)
		}
		if uint64(len(es)) != end-start {
			return 0, fmt.Errorf("reading entries [%d, %d): got %d", start, end, len(es))
		}
		for k, b := range es {
			if err := e.stepShared(rd, start+uint64(k), b); err != nil {
				return 0, err
			}
		}
		start = end
		sh.seen = end
	}
	return sh.seen, nil
}

// catchUpQuiet catches up before a read, if the log is shared.
func (e *Engine) catchUpQuiet() error {
	if e.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.catchUp(ctx)
	return err
}

// stepShared applies entry b at index i, unless it was applied already;
// the caller holds e.shared.mu.
func (e *Engine) stepShared(rd reader, i uint64, b []byte) error {
	if !isTaskEntry(b) {
		return nil
	}
	rec, err := parseRecord(b)
	if err == nil && rec == nil {
		return nil
	}
	if err == nil {
		s := e.slot(rec.taskID)
		if s == nil {
			err = check(rd, nil, rec, i)
		} else {
			s.mu.RLock()
			h := s.t.History
			if len(h) > 0 && h[len(h)-1].Index >= i {
				s.mu.RUnlock()
				return nil // applied already
			}
			err = check(rd, s.t, rec, i)
			s.mu.RUnlock()
		}
		if err == nil {
			e.applyLocked(s, rec, i, log.LeafHash(b))
			return nil
		}
	}
	var re *RuleError
	if !errors.As(err, &re) {
		if rec != nil {
			return err
		}
		re = refuse(RuleEntry, "%v", err)
	}
	kind := "?"
	if rec != nil {
		kind = rec.kind
	}
	e.mu.Lock()
	e.violations = append(e.violations, Violation{Index: i, Kind: kind, Rule: re.Rule, Msg: re.Msg})
	e.mu.Unlock()
	return nil
}

// applyLocked applies r at index i to its task (s, nil for a create),
// unless that entry was applied already. The caller holds e.shared.mu, or
// the log is not shared.
func (e *Engine) applyLocked(s *slot, r *record, i uint64, leaf []byte) Summary {
	if s == nil {
		s = e.slot(r.taskID)
	}
	if s == nil {
		t := newTask(r, i)
		t.apply(r, i, leaf)
		e.mu.Lock()
		e.tasks[r.taskID] = &slot{op: make(chan struct{}, 1), t: t}
		e.mu.Unlock()
		return t.Summary
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.t.History); n == 0 || s.t.History[n-1].Index < i {
		s.t.apply(r, i, leaf)
	}
	return s.t.Summary
}

// created records a task.create this engine wrote at idx.
func (e *Engine) created(r *record, idx uint64, leaf []byte) Summary {
	if e.shared != nil {
		e.shared.mu.Lock()
		defer e.shared.mu.Unlock()
	}
	return e.applyLocked(nil, r, idx, leaf)
}

// doShared runs an operation on an existing task of a shared log: read
// what others wrote, decide, append fenced; decide again if fenced off.
func (e *Engine) doShared(ctx context.Context, r *record) (*Result, error) {
	for attempt := 1; ; attempt++ {
		after, err := e.catchUp(ctx)
		if err != nil {
			return nil, err
		}
		s := e.slot(r.taskID)
		if s == nil {
			return nil, check(reader{ctx, e.log}, nil, r, 0)
		}
		if err := s.lock(ctx); err != nil {
			return nil, err
		}
		res, err := e.tryShared(ctx, s, r, after)
		s.unlock()
		if errors.Is(err, log.ErrFenced) && attempt < maxFenced {
			continue
		}
		return res, err
	}
}

// tryShared checks and writes r on task s, fenced at after; the caller
// holds s's op lock.
func (e *Engine) tryShared(ctx context.Context, s *slot, r *record, after uint64) (*Result, error) {
	s.mu.RLock()
	r.snapshot = nil
	if r.kind == KindHandoff && s.t.Owner == r.actor {
		r.snapshot = s.t.snapshot()
	}
	err := check(reader{ctx, e.log}, s.t, r, 0)
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	r.after = after
	idx, leaf, rc, err := e.write(ctx, r)
	if err != nil {
		return nil, err
	}
	e.shared.mu.Lock()
	sum := e.applyLocked(s, r, idx, leaf)
	e.shared.mu.Unlock()
	return &Result{Task: sum, Index: idx, LeafHash: leaf, Receipt: rc}, nil
}
