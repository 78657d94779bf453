package opp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/provlog/provlog/log"
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

// Diff describes how s and o differ, one line per difference; it is empty
// when they are equal.
func (s *State) Diff(o *State) []string {
	var d []string
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	byID := func(st *State) map[string]string {
		m := make(map[string]string, len(st.Tasks))
		for _, t := range st.Tasks {
			m[t.ID] = js(t)
		}
		return m
	}
	a, b := byID(s), byID(o)
	for _, t := range s.Tasks {
		switch bt, ok := b[t.ID]; {
		case !ok:
			d = append(d, fmt.Sprintf("task %s only in the first state", t.ID))
		case bt != a[t.ID]:
			d = append(d, fmt.Sprintf("task %s differs:\n  %s\n  %s", t.ID, a[t.ID], bt))
		}
	}
	for _, t := range o.Tasks {
		if _, ok := a[t.ID]; !ok {
			d = append(d, fmt.Sprintf("task %s only in the second state", t.ID))
		}
	}
	if va, vb := js(s.Violations), js(o.Violations); va != vb {
		d = append(d, fmt.Sprintf("violations differ:\n  %s\n  %s", va, vb))
	}
	return d
}

// rebuildChunk is how many entries a rebuild reads at once.
const rebuildChunk = 1024

// machine is task state being rebuilt from entries.
type machine struct {
	tasks      map[string]*task
	violations []Violation
}

// Rebuild derives the state of every task from the entries [0, size) of r
// alone, applying the same rules the engine enforces (evidence is checked
// by reading the cited entries from r). Entries of other kinds are skipped.
// A task entry that breaks a rule or does not parse changes nothing and is
// listed in State.Violations. Rebuild fails only if r cannot be read.
func Rebuild(ctx context.Context, r EntryReader, size uint64) (*State, error) {
	m, err := replay(ctx, r, size)
	if err != nil {
		return nil, err
	}
	st := &State{Violations: m.violations}
	for _, t := range m.tasks {
		st.Tasks = append(st.Tasks, t.view())
	}
	st.sort()
	return st, nil
}

func replay(ctx context.Context, r EntryReader, size uint64) (*machine, error) {
	m := &machine{tasks: map[string]*task{}}
	rd := reader{ctx, r}
	for start := uint64(0); start < size; {
		end := min(size, start+rebuildChunk)
		es, err := r.Entries(ctx, start, end)
		if err != nil {
			return nil, fmt.Errorf("reading entries [%d, %d): %w", start, end, err)
		}
		if uint64(len(es)) != end-start {
			return nil, fmt.Errorf("reading entries [%d, %d): got %d", start, end, len(es))
		}
		for k, b := range es {
			if err := m.step(rd, start+uint64(k), b); err != nil {
				return nil, err
			}
		}
		start = end
	}
	return m, nil
}

// step applies entry b at index i.
func (m *machine) step(rd reader, i uint64, b []byte) error {
	if !isTaskEntry(b) {
		return nil
	}
	rec, err := parseRecord(b)
	if err == nil && rec == nil {
		return nil // another kind that merely holds the marker inside
	}
	if err == nil {
		t := m.tasks[rec.taskID]
		if err = check(rd, t, rec, i); err == nil {
			if rec.kind == KindCreate {
				t = newTask(rec, i)
				m.tasks[rec.taskID] = t
			}
			t.apply(rec, i, log.LeafHash(b))
			return nil
		}
	}
	var re *RuleError
	if !errors.As(err, &re) {
		if rec != nil {
			return err // reading cited evidence failed
		}
		re = refuse(RuleEntry, "%v", err) // not an entry; the log audit reports it too
	}
	kind := "?"
	if rec != nil {
		kind = rec.kind
	} else if e, perr := log.ParseEntry(b); perr == nil {
		kind = e.Kind
	}
	m.violations = append(m.violations, Violation{Index: i, Kind: kind, Rule: re.Rule, Msg: re.Msg})
	return nil
}
