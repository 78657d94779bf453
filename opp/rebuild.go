package opp

import (
	"context"
	"encoding/hex"
	"iter"
	"slices"
)

// rebuildChunk is how many entries a rebuild reads at once.
const rebuildChunk = 1024

// Tasks is the state of every task of a log, derived as [Rebuild] derives
// it, held as an [Engine] holds it: an index of the tasks, and whole tasks
// read back from the log when asked for. Its memory grows with the number
// of tasks by the index alone.
type Tasks struct{ ts *taskSet }

// Rebuild derives the tasks of the entries [0, size) of r alone, applying
// the same rules the engine enforces (evidence is checked by reading the
// cited entries from r). Entries of other kinds are skipped. A task entry
// that breaks a rule or does not parse changes nothing and is listed in
// [Tasks.Violations]. Rebuild fails only if r cannot be read.
//
// Rebuild holds what an [Engine] holds, an index of the tasks and a
// bounded cache, never every task at once: [Tasks.Task] and [Tasks.All]
// read tasks back from r when asked for.
func Rebuild(ctx context.Context, r EntryReader, size uint64) (*Tasks, error) {
	ts := newTaskSet(r, 0)
	if err := ts.replay(ctx, 0, size, nil); err != nil {
		return nil, err
	}
	return &Tasks{ts}, nil
}

// Len returns how many tasks there are.
func (t *Tasks) Len() int {
	t.ts.mu.Lock()
	defer t.ts.mu.Unlock()
	return int(t.ts.idx.heads.len())
}

// Last returns the log index of the latest entry of the task with this
// id, or false if there is no such task.
func (t *Tasks) Last(id string) (uint64, bool) {
	t.ts.mu.Lock()
	defer t.ts.mu.Unlock()
	n, ok := t.ts.idx.lookup(id)
	if !ok {
		return 0, false
	}
	return t.ts.idx.lastIndex(n), true
}

// CitedCall reports whether an observed claim that passed the rules cites
// the call at log index call (for one task or, in a log an older provlog
// wrote, for several).
func (t *Tasks) CitedCall(call uint64) bool {
	t.ts.mu.Lock()
	defer t.ts.mu.Unlock()
	_, ok := t.ts.observed[call]
	return ok
}

// Violations returns the task entries that broke a rule, in log order.
func (t *Tasks) Violations() []Violation {
	t.ts.mu.Lock()
	defer t.ts.mu.Unlock()
	return slices.Clone(t.ts.violations)
}

// Task returns the task with this id, or nil if there is none.
func (t *Tasks) Task(ctx context.Context, id string) (*Task, error) {
	n, ok := t.ts.lookup(id)
	if !ok {
		return nil, nil
	}
	tk, err := t.ts.load(ctx, n)
	if err != nil {
		return nil, err
	}
	tk.mu.RLock()
	defer tk.mu.RUnlock()
	v := tk.view()
	return &v, nil
}

// All yields every task, in order of creation, one at a time: each is
// read back from the log (or the cache) as it is yielded, and none is
// kept. A failed read is yielded as the error, and ends the sequence.
func (t *Tasks) All(ctx context.Context) iter.Seq2[*Task, error] { return t.ts.all(ctx) }

// IDs yields the id of every task, in the order they were indexed (log
// order, for [Rebuild]), from the index alone: no task is read back from
// the log. An audit that holds a list of the task ids from elsewhere
// (a shared log's fence keys) names with it the tasks the list lacks.
func (t *Tasks) IDs() iter.Seq[string] {
	return func(yield func(string) bool) {
		t.ts.mu.Lock()
		count := t.ts.idx.keys.len()
		t.ts.mu.Unlock()
		for n := range count {
			t.ts.mu.Lock()
			k := *t.ts.idx.keys.at(n)
			t.ts.mu.Unlock()
			if !yield("t_" + hex.EncodeToString(k[:])) {
				return
			}
		}
	}
}
