package opp

import (
	"container/heap"
	"context"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"

	"github.com/provlog/provlog/log"
)

// DefaultCacheBytes is the default bound of the cache of whole tasks.
const DefaultCacheBytes = 8 << 20

// taskSet is the task state of a log: the index and the cache (index.go)
// and the per-task operation locks, under one mutex that is never held
// across a read of the log.
//
// Lock order: a task's mu before the set's mu. A task changes only in
// apply, under both, so a cached task and the index never disagree.
type taskSet struct {
	log EntryReader

	mu         sync.Mutex
	idx        *index
	cache      *cache
	ops        map[uint32]*opLock
	violations []Violation
	// calls follows the calls of the entries read (calls.go).
	calls callSet
	// observed maps each call an observed claim cites to the task it is
	// evidence for (onetask.go).
	observed map[uint64]uint32
}

// reader reads r's entries for the rules, which judge an entry against
// the calls of the entries before it.
func (s *taskSet) reader(ctx context.Context) reader {
	return reader{ctx: ctx, r: s.log, calls: &s.calls}
}

// opLock is held by the one operation that may change a task, from
// validation through the append to the update; refs counts who holds or
// waits for it, so it is dropped when nobody does.
type opLock struct {
	ch   chan struct{}
	refs int
}

func newTaskSet(r EntryReader, cacheBytes int64) *taskSet {
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	s := &taskSet{log: r, idx: newIndex(), cache: newCache(cacheBytes), ops: map[uint32]*opLock{}}
	runtime.AddCleanup(s, func(m *offheap) { m.release() }, s.idx.mem)
	return s
}

func (s *taskSet) lookup(id string) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.lookup(id)
}

// lock takes task n's operation lock.
func (s *taskSet) lock(ctx context.Context, n uint32) error {
	s.mu.Lock()
	o := s.ops[n]
	if o == nil {
		o = &opLock{ch: make(chan struct{}, 1)}
		s.ops[n] = o
	}
	o.refs++
	s.mu.Unlock()
	select {
	case o.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		s.drop(n, o)
		return ctx.Err()
	}
}

func (s *taskSet) unlock(n uint32) {
	s.mu.Lock()
	o := s.ops[n]
	s.mu.Unlock()
	<-o.ch
	s.drop(n, o)
}

func (s *taskSet) drop(n uint32, o *opLock) {
	s.mu.Lock()
	if o.refs--; o.refs == 0 {
		delete(s.ops, n)
	}
	s.mu.Unlock()
}

// load returns task n, from the cache or rebuilt from its entries. The
// caller reads it under its mu when another goroutine may apply to it.
func (s *taskSet) load(ctx context.Context, n uint32) (*task, error) {
	for {
		s.mu.Lock()
		if t := s.cache.get(n); t != nil {
			s.mu.Unlock()
			return t, nil
		}
		at := s.idx.entries(n)
		s.mu.Unlock()
		t, err := s.build(ctx, at)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if c := s.cache.get(n); c != nil {
			s.mu.Unlock()
			return c, nil
		}
		if s.idx.lastIndex(n) == at[len(at)-1] {
			s.cache.put(n, t)
			s.mu.Unlock()
			return t, nil
		}
		s.mu.Unlock() // an entry was applied meanwhile: read again
	}
}

// build rebuilds a task from its entries at the given indices, oldest
// (the create) first. They passed the rules when they were indexed, so
// they are applied without checking again; an entry that no longer reads
// as what was indexed means the store changed under the index.
func (s *taskSet) build(ctx context.Context, at []uint64) (*task, error) {
	var t *task
	for k := 0; k < len(at); {
		run := 1 // read consecutive indices at once
		for k+run < len(at) && at[k+run] == at[k]+uint64(run) {
			run++
		}
		es, err := s.log.Entries(ctx, at[k], at[k]+uint64(run))
		if err == nil && len(es) != run {
			err = fmt.Errorf("got %d entries", len(es))
		}
		if err != nil {
			return nil, fmt.Errorf("reading task entries [%d, %d): %w", at[k], at[k]+uint64(run), err)
		}
		for j, b := range es {
			i := at[k+j]
			r, err := parseRecord(b)
			switch {
			case err != nil || r == nil:
				err = fmt.Errorf("does not parse as a task entry (%v)", err)
			case t == nil && r.kind != KindCreate:
				err = fmt.Errorf("is a %s entry, not the task's create", r.kind)
			case t != nil && (r.kind == KindCreate || r.taskID != t.ID):
				err = fmt.Errorf("is a %s entry of task %s, not a later entry of %s", r.kind, r.taskID, t.ID)
			}
			if err != nil {
				return nil, fmt.Errorf("task entry %d %v: the log changed under the task index; restart provlog: %w", i, err, log.ErrCorrupt)
			}
			if t == nil {
				t = newTask(r, i)
			}
			t.apply(r, i, log.LeafHash(b))
		}
		k += run
	}
	return t, nil
}

// apply applies r, which passed the rules against t (nil for a create),
// at index i with leaf hash leaf, to the task, the index and the cache.
// An error means the index is full: the task state no longer follows the
// log.
func (s *taskSet) apply(t *task, r *record, i uint64, leaf []byte) (Summary, error) {
	if t == nil {
		t = newTask(r, i)
		t.apply(r, i, leaf)
		s.mu.Lock()
		defer s.mu.Unlock()
		n, err := s.idx.add(r.taskID, i)
		if err != nil {
			return Summary{}, err
		}
		s.cache.put(n, t)
		return t.Summary, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.idx.lookup(t.ID)
	if !ok {
		return Summary{}, fmt.Errorf("task %s is not in the index", t.ID)
	}
	t.apply(r, i, leaf)
	if err := s.idx.extend(n, i, t.State); err != nil {
		return Summary{}, err
	}
	s.noteObserved(n, r)
	s.cache.put(n, t) // t is now the newest; it replaces any other copy
	return t.Summary, nil
}

// step applies entry b at index i by the rules, unless it was applied
// already (on a shared log, by the writer); entries of other kinds are
// skipped. A task entry that breaks a rule or does not parse changes
// nothing and is recorded as a Violation. step fails only if the log
// cannot be read or the index is full.
func (s *taskSet) step(rd reader, i uint64, b []byte) error {
	if !isTaskEntry(b) {
		return nil
	}
	rec, err := parseRecord(b)
	if err == nil && rec == nil {
		return nil // another kind that merely holds the marker inside
	}
	if err == nil {
		var t *task
		if n, ok := s.lookup(rec.taskID); ok {
			s.mu.Lock()
			done := s.idx.lastIndex(n) >= i
			s.mu.Unlock()
			if done {
				return nil
			}
			if t, err = s.load(rd.ctx, n); err != nil {
				return err
			}
			t.mu.RLock()
			err = check(rd, t, rec, i)
			t.mu.RUnlock()
		} else {
			err = check(rd, nil, rec, i)
		}
		if err == nil {
			_, err = s.apply(t, rec, i, log.LeafHash(b))
			return err
		}
	}
	re, ok := Refusal(err)
	if !ok {
		if rec != nil {
			return err // reading cited evidence failed
		}
		re = Refuse(RuleEntry, "%v", err).Problems[0] // not an entry; the log audit reports it too
	}
	kind := "?"
	if rec != nil {
		kind = rec.kind
	} else if e, perr := log.ParseEntry(b); perr == nil {
		kind = e.Kind
	}
	s.mu.Lock()
	s.violations = append(s.violations, Violation{Index: i, Kind: kind, Rule: re.Rule, Msg: re.Msg})
	s.mu.Unlock()
	return nil
}

// replay steps through the entries [start, end) of the log, in chunks,
// and calls done after each chunk with the index it read up to. Each
// entry is judged before the calls learn of it, so that a claim is judged
// by the calls before it. Of a SparseReader it reads the entries held,
// one at a time, and passes over the {} between them.
func (s *taskSet) replay(ctx context.Context, start, end uint64, done func(uint64)) error {
	rd := s.reader(ctx)
	sparse, _ := s.log.(SparseReader)
	for start < end {
		stop := min(end, start+rebuildChunk)
		if sparse != nil {
			next, ok := sparse.Held(start)
			if !ok || next > end {
				next = end
			}
			if next > start {
				s.calls.pass(start, next)
				start = next
				if done != nil {
					done(start)
				}
				continue
			}
			stop = start + 1
		}
		es, err := s.log.Entries(ctx, start, stop)
		if err == nil && uint64(len(es)) != stop-start {
			err = fmt.Errorf("got %d", len(es))
		}
		if err != nil {
			return fmt.Errorf("reading entries [%d, %d): %w", start, stop, err)
		}
		for k, b := range es {
			if err := s.step(rd, start+uint64(k), b); err != nil {
				return err
			}
			s.calls.add(start+uint64(k), b)
		}
		start = stop
		if done != nil {
			done(stop)
		}
	}
	return nil
}

// pending returns up to limit tasks that can be accepted, oldest first,
// and how many there are in all. It scans the index once, keeping the
// oldest limit in a heap, and reads only those from the log.
func (s *taskSet) pending(ctx context.Context, limit int) ([]Summary, int, error) {
	if limit <= 0 {
		return nil, 0, fmt.Errorf("list limit %d: must be positive", limit)
	}
	oldest := &newest{}
	total := 0
	s.mu.Lock()
	for n := range s.idx.heads.len() {
		h := s.idx.heads.at(n)
		if h.state != stateCodes[StatePending] {
			continue
		}
		total++
		if c := s.idx.created(n); oldest.Len() < limit {
			heap.Push(oldest, cand{c, n})
		} else if (*oldest)[0].created > c {
			(*oldest)[0] = cand{c, n}
			heap.Fix(oldest, 0)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(*oldest, func(a, b cand) int { return cmpIndex(a.created, b.created) })
	out := make([]Summary, 0, oldest.Len())
	for _, c := range *oldest {
		t, err := s.load(ctx, c.n)
		if err != nil {
			return nil, 0, err
		}
		t.mu.RLock()
		if t.State == StatePending { // it may have changed since
			out = append(out, t.Summary)
		}
		t.mu.RUnlock()
	}
	return out, total, nil
}

// cand is a task in a list: its create's index and its number.
type cand struct {
	created uint64
	n       uint32
}

// newest is a heap of cands with the newest on top.
type newest []cand

func (h newest) Len() int           { return len(h) }
func (h newest) Less(i, j int) bool { return h[i].created > h[j].created }
func (h newest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newest) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *newest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// all yields every task there is when it starts, in order of creation,
// each loaded when it is yielded. The index holds them in the order their
// creates were applied, which is the order of creation but for creates
// applied out of order (appends committed together, answered in any
// order); only then does it sort their numbers, 4 bytes a task.
func (s *taskSet) all(ctx context.Context) iter.Seq2[*Task, error] {
	return func(yield func(*Task, error) bool) {
		s.mu.Lock()
		count := s.idx.heads.len()
		var order []uint32
		for n := uint32(1); n < count; n++ {
			if s.idx.created(n) < s.idx.created(n-1) {
				order = make([]uint32, count)
				for k := range order {
					order[k] = uint32(k)
				}
				slices.SortFunc(order, func(a, b uint32) int { return cmpIndex(s.idx.created(a), s.idx.created(b)) })
				break
			}
		}
		s.mu.Unlock()
		for k := range count {
			n := k
			if order != nil {
				n = order[k]
			}
			t, err := s.load(ctx, n)
			if err != nil {
				yield(nil, err)
				return
			}
			t.mu.RLock()
			v := t.view()
			t.mu.RUnlock()
			if !yield(&v, nil) {
				return
			}
		}
	}
}
