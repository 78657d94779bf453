package opp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provlog/provlog/log"
)

// Options tune an [Engine]; the zero value is usable.
type Options struct {
	// Now is the clock for entry times (time.Now if nil).
	Now func() time.Time
	// Rand is the source of task ids (crypto/rand if nil).
	Rand io.Reader
	// KnownActor, if not nil, says why an actor id is not one this
	// deployment knows (nil: it is); create_task offered to such an actor
	// and handoff_task to one are refused before anything is written,
	// since a task reserved for nobody who can accept it would be stuck. It is a policy of the
	// running engine, not a rule of the log: entries already written are
	// never judged by it.
	KnownActor func(id string) error
	// IndexFile, if set, is where [Engine.SaveIndex] keeps a snapshot of
	// the task index and where Open looks for one, so that a restart
	// replays only the entries written after it (snapshot.go).
	IndexFile string
	// CacheBytes bounds the cache of whole tasks kept in memory
	// ([DefaultCacheBytes] if 0); a task not in it is rebuilt from its
	// entries in the log when it is needed.
	CacheBytes int64
}

// An Engine enforces the OPP rules over a log. It is safe for concurrent
// use; see the package documentation for what it serializes. Its memory
// is bounded: an index of the log's tasks and a cache of whole ones
// (index.go).
type Engine struct {
	log   Log
	now   func() time.Time
	rand  io.Reader
	known func(string) error

	tasks *taskSet
	// failed is set when an append failed in a way that leaves unknown
	// whether the entry is in the log; the engine then writes nothing
	// more, and a restart rebuilds the truth from the log.
	failed atomic.Pointer[error]
	// shared is set when other sidecars write the same log (shared.go).
	shared *sharedLog

	// gate is held shared by every operation that writes, and
	// exclusively by SaveIndex, which closes the engine to writes.
	gate      sync.RWMutex
	closed    bool
	indexFile string // Options.IndexFile (snapshot.go)
	resumed   uint64 // the entries the loaded snapshot covered
	resumeErr error  // why no snapshot was loaded
}

// Resumed says how Open rebuilt the state: from a snapshot of the index
// covering the entries [0, from) and the entries after them, or (from 0)
// from the whole log, with err saying why no snapshot served.
func (e *Engine) Resumed() (from uint64, err error) { return e.resumed, e.resumeErr }

// Open returns an engine over l whose state is rebuilt from the entries
// [0, size) of l, read in chunks. Task entries that break a rule are
// ignored and reported by [Engine.Violations]; Open fails only if the log
// cannot be read.
func Open(ctx context.Context, l Log, size uint64, opts *Options) (*Engine, error) {
	if opts == nil {
		opts = &Options{}
	}
	e := &Engine{log: l, now: opts.Now, rand: opts.Rand, known: opts.KnownActor, indexFile: opts.IndexFile}
	e.tasks = newTaskSet(l, opts.CacheBytes)
	if opts.IndexFile != "" {
		e.resumed, e.resumeErr = e.tasks.loadSnapshot(ctx, opts.IndexFile, size)
		if e.resumeErr != nil {
			e.tasks.idx.mem.release()
			e.tasks = newTaskSet(l, opts.CacheBytes)
		}
	}
	if err := e.tasks.replay(ctx, e.resumed, size, nil); err != nil {
		return nil, err
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.rand == nil {
		e.rand = rand.Reader
	}
	e.openShared(size)
	return e, nil
}

// Err returns the error that stopped the engine from writing, if any: an
// append whose outcome is unknown. Serve it on a health endpoint.
func (e *Engine) Err() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Violations returns the rule-breaking task entries found when the engine
// was opened.
func (e *Engine) Violations() []Violation {
	e.tasks.mu.Lock()
	defer e.tasks.mu.Unlock()
	return slices.Clone(e.tasks.violations)
}

func (e *Engine) record(kind, actor, taskID string) *record {
	return &record{kind: kind, actor: actor, taskID: taskID, time: e.now().UTC().Round(0)}
}

// writeApplied writes r, applies it to t (nil when r creates the task)
// and returns the result. A refusal from write means nothing was written.
func (e *Engine) writeApplied(ctx context.Context, t *task, r *record) (*Result, error) {
	idx, leaf, rc, err := e.write(ctx, r)
	if err != nil {
		return nil, err
	}
	sum, err := e.applied(t, r, idx, leaf)
	if err != nil {
		return nil, err
	}
	return &Result{Task: sum, Index: idx, LeafHash: leaf, Receipt: rc}, nil
}

// write appends r and returns what was written. A refusal from check
// means nothing was written.
func (e *Engine) write(ctx context.Context, r *record) (uint64, []byte, *log.Receipt, error) {
	r.auth = log.AuthFrom(ctx) // the claims of the OAuth token the caller's actor came from, if any
	b, err := r.marshal()
	if err != nil {
		if errors.Is(err, log.ErrEntryTooLarge) {
			return 0, nil, nil, Refuse(RuleInvalidArgument, "the entry would be over the log's limit of %d bytes; shorten the text fields", log.MaxEntrySize)
		}
		return 0, nil, nil, fmt.Errorf("encoding %s entry: %w", r.kind, err)
	}
	r.size = len(b)
	if p := e.failed.Load(); p != nil {
		return 0, nil, nil, *p
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, nil, err
	}
	rc, err := e.append(ctx, r, b)
	if err != nil {
		err = fmt.Errorf("appending %s entry: %w", r.kind, err)
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !nothingWritten(err) {
			// The log's contract says a failed Append wrote nothing, but
			// a failure after the commit (building the receipt) would
			// leave the live state behind the log. Stop rather than guess.
			stopped := fmt.Errorf("task engine stopped after a failed append (restart provlog to rebuild task state from the log): %w", err)
			e.failed.CompareAndSwap(nil, &stopped)
		}
		return 0, nil, nil, err
	}
	leaf := rc.Extra
	if len(leaf) != log.HashSize {
		leaf = log.LeafHash(b)
	}
	return rc.Index, leaf, rc, nil
}

// writeChecked writes r, which passed check and checkGrowth against t,
// after the rules for an observed claim that are checked only when it is
// written: it cites a call that succeeded (succeeded.go) and no call
// that is evidence for another task (onetask.go).
func (e *Engine) writeChecked(ctx context.Context, t *task, r *record) (*Result, error) {
	if err := checkSucceeded(r); err != nil {
		return nil, err
	}
	release, perr := e.tasks.claimCalls(t, r)
	if perr != nil {
		return nil, perr
	}
	res, err := e.writeApplied(ctx, t, r)
	if err != nil {
		release()
	}
	return res, err
}

// Create writes a task.create entry: a new task in pending_acceptance with
// no owner, reserved for args.OfferTo if that is set.
func (e *Engine) Create(ctx context.Context, actor string, args CreateArgs) (*Result, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.gate.RUnlock()
	var idb [16]byte
	if _, err := io.ReadFull(e.rand, idb[:]); err != nil {
		return nil, fmt.Errorf("making task id: %w", err)
	}
	r := e.record(KindCreate, actor, "t_"+hex.EncodeToString(idb[:]))
	r.title, r.description, r.offerTo = args.Title, args.Description, args.OfferTo
	if err := check(e.tasks.reader(ctx), nil, r, 0); err != nil {
		return nil, err
	}
	if err := checkNew(r); err != nil {
		return nil, err
	}
	if e.known != nil && r.offerTo != "" {
		if err := e.known(r.offerTo); err != nil {
			return nil, Refuse(RuleInvalidArgument, "offer_to: %s", err)
		}
	}
	if _, dup := e.tasks.lookup(r.taskID); dup { // only a broken Rand gets here
		return nil, fmt.Errorf("task id %s is already taken; the random source is broken", r.taskID)
	}
	return e.writeApplied(ctx, nil, r)
}

// Accept writes a task.accept entry making actor the owner of the task.
func (e *Engine) Accept(ctx context.Context, actor, taskID string) (*Result, error) {
	return e.do(ctx, e.record(KindAccept, actor, taskID))
}

// ReportCompletion writes a task.claim entry: the owner's completion claim
// with its provenance and evidence. The first claim on an accepted task
// completes it.
func (e *Engine) ReportCompletion(ctx context.Context, actor string, args ClaimArgs) (*Result, error) {
	r := e.record(KindClaim, actor, args.TaskID)
	r.provenance, r.summary, r.source = Provenance(args.Provenance), args.Summary, args.Source
	if len(args.Evidence) > 0 {
		r.evidence = slices.Clone(args.Evidence)
	}
	return e.do(ctx, r)
}

// Handoff writes a task.handoff entry carrying a snapshot of the task,
// clears the owner and reserves the task for args.To, who must accept it.
func (e *Engine) Handoff(ctx context.Context, actor string, args HandoffArgs) (*Result, error) {
	if e.known != nil && args.To != "" {
		if err := e.known(args.To); err != nil {
			return nil, Refuse(RuleHandoffTarget, "%s", err)
		}
	}
	r := e.record(KindHandoff, actor, args.TaskID)
	r.to, r.note = args.To, args.Note
	return e.do(ctx, r)
}

// Release writes a task.release entry: the owner gives the task up, and it
// returns to pending_acceptance with no owner and no reservation.
func (e *Engine) Release(ctx context.Context, actor, taskID, note string) (*Result, error) {
	r := e.record(KindRelease, actor, taskID)
	r.note = note
	return e.do(ctx, r)
}

// Cancel writes a task.cancel entry: the creator ends a task that is
// neither completed nor cancelled.
func (e *Engine) Cancel(ctx context.Context, actor, taskID, note string) (*Result, error) {
	r := e.record(KindCancel, actor, taskID)
	r.note = note
	return e.do(ctx, r)
}

// errClosed refuses writes once SaveIndex has run.
var errClosed = errors.New("the task engine is shut down (its index was saved); nothing was written")

// enter lets a writing operation in, unless the engine is closed; the
// caller releases e.gate.RUnlock when done.
func (e *Engine) enter() error {
	e.gate.RLock()
	if e.closed {
		e.gate.RUnlock()
		return errClosed
	}
	return nil
}

// applied applies r, written at idx, to t (nil for a create). On a
// shared log it waits for the reader of others' entries, which may apply
// the same entry first. An index too full to take it stops the engine.
func (e *Engine) applied(t *task, r *record, idx uint64, leaf []byte) (Summary, error) {
	if e.shared != nil {
		e.shared.mu.Lock()
		defer e.shared.mu.Unlock()
		if n, ok := e.tasks.lookup(r.taskID); ok {
			e.tasks.mu.Lock()
			done := e.tasks.idx.lastIndex(n) >= idx
			e.tasks.mu.Unlock()
			if done {
				t, err := e.tasks.load(context.Background(), n)
				if err != nil {
					return Summary{}, err
				}
				t.mu.RLock()
				defer t.mu.RUnlock()
				return t.Summary, nil
			}
		}
	}
	sum, err := e.tasks.apply(t, r, idx, leaf)
	if err != nil {
		stopped := fmt.Errorf("task engine stopped: entry %d is in the log but not in the task state (restart provlog): %w", idx, err)
		e.failed.CompareAndSwap(nil, &stopped)
		return Summary{}, stopped
	}
	return sum, nil
}

// task finds the task r acts on and takes its operation lock; a nil task
// with a nil error means there is no such task. unlock releases the lock.
func (e *Engine) task(ctx context.Context, id string) (t *task, unlock func(), err error) {
	n, ok := e.tasks.lookup(id)
	if !ok {
		return nil, nil, nil
	}
	if err := e.tasks.lock(ctx, n); err != nil {
		return nil, nil, err
	}
	if t, err = e.tasks.load(ctx, n); err != nil {
		e.tasks.unlock(n)
		return nil, nil, err
	}
	return t, func() { e.tasks.unlock(n) }, nil
}

// do runs an operation on an existing task under the task's lock.
func (e *Engine) do(ctx context.Context, r *record) (*Result, error) {
	if err := checkShape(r); err != nil {
		return nil, err
	}
	if err := checkNew(r); err != nil {
		return nil, err
	}
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.gate.RUnlock()
	if e.shared != nil {
		return e.doShared(ctx, r)
	}
	t, unlock, err := e.task(ctx, r.taskID)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, check(e.tasks.reader(ctx), nil, r, 0)
	}
	defer unlock()
	// Only the holder of the task's lock changes it, so it reads t
	// without t.mu.
	r.prev = new(t.head())
	if r.kind == KindHandoff && t.Owner == r.actor {
		r.snapshot = t.snapshot()
	}
	if err := e.followCalls(ctx, r); err != nil {
		return nil, err
	}
	if err := check(e.tasks.reader(ctx), t, r, 0); err != nil {
		return nil, err
	}
	if err := checkGrowth(t, r); err != nil {
		return nil, err
	}
	return e.writeChecked(ctx, t, r)
}

// Status returns a task with its full history.
func (e *Engine) Status(ctx context.Context, taskID string) (*Task, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	if err := e.catchUpQuiet(ctx); err != nil {
		return nil, err
	}
	n, ok := e.tasks.lookup(taskID)
	if !ok {
		return nil, Refuse(RuleUnknownTask, "no task %s; get task ids from create_task or list_unaccepted_tasks", taskID)
	}
	t, err := e.tasks.load(ctx, n)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	v := t.view()
	t.mu.RUnlock()
	return &v, nil
}

// ListUnaccepted returns the oldest tasks, at most limit of them, with no
// owner that can still be accepted (new, handed off or released), oldest
// first, and how many such tasks there are in all.
func (e *Engine) ListUnaccepted(ctx context.Context, limit int) ([]Summary, int, error) {
	e.catchUpQuiet(ctx) // on failure, what this sidecar knows
	return e.tasks.pending(ctx, limit)
}

func cmpIndex(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// All yields every task, in order of creation, one at a time, as
// [Tasks.All] does; on a shared log, after reading what others appended.
func (e *Engine) All(ctx context.Context) iter.Seq2[*Task, error] {
	e.catchUpQuiet(ctx) // on failure, what this sidecar knows
	return e.tasks.all(ctx)
}
