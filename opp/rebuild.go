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

func (s *State) sort() {
	slices.SortFunc(s.Tasks, func(a, b Task) int { return cmpIndex(a.CreatedIndex, b.CreatedIndex) })
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
	ts := newTaskSet(r, 0)
	if err := ts.replay(ctx, 0, size, nil); err != nil {
		return nil, err
	}
	return ts.state(ctx)
}
