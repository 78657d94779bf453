package opp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/opp/opptest"
)

const testOrigin = "provlog.test/opp"

// A testLog is a real log: a sequencer over a store, read back from it.
type testLog = opptest.Log

// newLogOn starts a log over store with a genesis entry.
func newLogOn(tb testing.TB, store log.Storage) *testLog {
	return opptest.NewLog(tb, store, testOrigin)
}

func newLog(tb testing.TB) *testLog { return newLogOn(tb, logtest.NewMemory()) }

func newEngine(tb testing.TB, l *testLog) *opp.Engine {
	tb.Helper()
	e, err := opp.Open(context.Background(), l, l.Size(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// appendCall writes a call entry by actor, as the proxy records a tool
// call, and returns its index.
func appendCall(tb testing.TB, l *testLog, actor string) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: actor, Fields: map[string]any{
		"server": "everything", "tool": "echo", "args": map[string]any{"message": "hi"}, "is_error": false,
	}})
}

// appendCallStart writes a call entry as the proxy now does, before the
// call is forwarded, and returns its index.
func appendCallStart(tb testing.TB, l opp.Log, actor string) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.CallEntry{Time: time.Now(), Actor: actor, Server: "everything", Tool: "echo", Args: log.CanonicalJSON(`{"message":"hi"}`)})
}

// appendCallResult writes the call.result of the call at index call.
func appendCallResult(tb testing.TB, l opp.Log, actor string, call uint64) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.CallResultEntry{Time: time.Now(), Actor: actor, Call: call, ResultSHA256: strings.Repeat("0", 64), ResultBytes: 2})
}

// appendRaw writes an arbitrary entry (for entries the engine would refuse).
func appendRaw(tb testing.TB, l *testLog, kind, actor string, fields map[string]any) uint64 {
	tb.Helper()
	return appendEntry(tb, l, &log.Entry{Kind: kind, Time: time.Now(), Actor: actor, Fields: fields})
}

// appendEntry marshals e, appends it and returns its index.
func appendEntry(tb testing.TB, l opp.Log, e interface{ Marshal() ([]byte, error) }) uint64 {
	tb.Helper()
	b, err := e.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := l.Append(context.Background(), b)
	if err != nil {
		tb.Fatal(err)
	}
	return rc.Index
}

func ruleOf(err error) string {
	if re, ok := opp.Refusal(err); ok {
		return re.Rule
	}
	if err == nil {
		return ""
	}
	return "error: " + err.Error()
}

// state is every task of a log at once, for comparing one derivation
// with another.
type state struct {
	Tasks      []opp.Task
	Violations []opp.Violation
}

func collect(tb testing.TB, all iter.Seq2[*opp.Task, error], vs []opp.Violation) *state {
	tb.Helper()
	st := &state{Violations: vs}
	for t, err := range all {
		if err != nil {
			tb.Fatal(err)
		}
		st.Tasks = append(st.Tasks, *t)
	}
	return st
}

// rebuildState is the state rebuilt from the entries of l alone.
func rebuildState(tb testing.TB, l opp.EntryReader, size uint64) *state {
	tb.Helper()
	tasks, err := opp.Rebuild(context.Background(), l, size)
	if err != nil {
		tb.Fatal(err)
	}
	st := collect(tb, tasks.All(context.Background()), tasks.Violations())
	if len(st.Tasks) != tasks.Len() {
		tb.Fatalf("Rebuild: All yielded %d tasks, Len says %d", len(st.Tasks), tasks.Len())
	}
	// IDs, from the index alone, names the tasks All reads back.
	ids := slices.Sorted(tasks.IDs())
	var want []string
	for _, t := range st.Tasks {
		want = append(want, t.ID)
	}
	if slices.Sort(want); !slices.Equal(ids, want) {
		tb.Fatalf("Rebuild: IDs yielded %q, All %q", ids, want)
	}
	return st
}

// checkRebuild asserts that the state rebuilt from the log alone equals the
// engine's live state.
func checkRebuild(tb testing.TB, l *testLog, e *opp.Engine) *state {
	tb.Helper()
	st := rebuildState(tb, l, l.Size())
	if d := diffStates(mustState(tb, e), st); len(d) > 0 {
		tb.Fatalf("rebuilt state differs from the live state:\n%v", d)
	}
	return st
}

func mustState(tb testing.TB, e *opp.Engine) *state {
	tb.Helper()
	return collect(tb, e.All(context.Background()), e.Violations())
}

func unaccepted(tb testing.TB, e *opp.Engine) []opp.Summary {
	tb.Helper()
	list, total, err := e.ListUnaccepted(context.Background(), 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	if total != len(list) {
		tb.Fatalf("ListUnaccepted returned %d of %d tasks, with no limit reached", len(list), total)
	}
	return list
}

// diffStates describes how a and b differ, one line per difference; it is
// empty when they are equal.
func diffStates(a, b *state) []string {
	var d []string
	js := func(v any) string {
		j, err := json.Marshal(v)
		if err != nil {
			return err.Error()
		}
		return string(j)
	}
	byID := func(st *state) map[string]string {
		m := make(map[string]string, len(st.Tasks))
		for _, t := range st.Tasks {
			m[t.ID] = js(t)
		}
		return m
	}
	ma, mb := byID(a), byID(b)
	for _, t := range a.Tasks {
		switch bt, ok := mb[t.ID]; {
		case !ok:
			d = append(d, fmt.Sprintf("task %s only in the first state", t.ID))
		case bt != ma[t.ID]:
			d = append(d, fmt.Sprintf("task %s differs:\n  %s\n  %s", t.ID, ma[t.ID], bt))
		}
	}
	for _, t := range b.Tasks {
		if _, ok := ma[t.ID]; !ok {
			d = append(d, fmt.Sprintf("task %s only in the second state", t.ID))
		}
	}
	if va, vb := js(a.Violations), js(b.Violations); va != vb {
		d = append(d, fmt.Sprintf("violations differ:\n  %s\n  %s", va, vb))
	}
	return d
}

// Task returns the task with this id, or nil.
func (s *state) Task(id string) *opp.Task {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return &s.Tasks[i]
		}
	}
	return nil
}
