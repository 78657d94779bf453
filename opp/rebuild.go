package opp

import (
	"context"
	"slices"
)

// State is the state of every task, as [Rebuild] derives it from entries
// or [Engine.State] holds it.
type State struct {
	Tasks      []Task      // in order of creation
	Violations []Violation // task entries that broke a rule, in log order
}

// Task returns the task with this id, or nil.
func (s *State) Task(id string) *Task {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return &s.Tasks[i]
		}
	}
	return nil
}

// rebuildChunk is how many entries a rebuild reads at once.
const rebuildChunk = 1024

// Rebuild derives the state of every task from the entries [0, size) of r
// alone, applying the same rules the engine enforces (evidence is checked
// by reading the cited entries from r). Entries of other kinds are skipped.
// A task entry that breaks a rule or does not parse changes nothing and is
// listed in State.Violations. Rebuild fails only if r cannot be read.
//
// While it replays, Rebuild holds what an [Engine] holds: an index of the
// tasks and a bounded cache; the State it returns holds every task.
func Rebuild(ctx context.Context, r EntryReader, size uint64) (*State, error) {
	t, err := Replay(ctx, r, size)
	if err != nil {
		return nil, err
	}
	return t.State(ctx)
}

// Tasks is the state of every task of a log, derived as [Rebuild] derives
// it, held as an [Engine] holds it: an index of the tasks, and whole tasks
// read back from the log when asked for. Its memory grows with the number
// of tasks by the index alone.
type Tasks struct{ ts *taskSet }

// Replay derives the tasks of the entries [0, size) of r, as [Rebuild]
// does, and returns them without holding them all.
func Replay(ctx context.Context, r EntryReader, size uint64) (*Tasks, error) {
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
	v := tk.view()
	return &v, nil
}

// State returns every task at once, in order of creation.
func (t *Tasks) State(ctx context.Context) (*State, error) { return t.ts.state(ctx) }
