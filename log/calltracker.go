package log

import (
	"fmt"
	"slices"
)

// A CallTracker pairs call entries with their call.result entries, read in
// log order, keeping only the calls still without an outcome. The zero
// value is ready to use.
//
// It reads an entry parsed ([CallTracker.Add]) or as bytes
// ([CallTracker.AddBytes]); either way it reads the same few members (a
// [callLink]) and applies one rule to them.
type CallTracker struct {
	n    uint64
	open map[uint64]string // call index -> actor
}

// A callLink is what a call or call.result entry tells a [CallTracker].
type callLink struct {
	kind  string // KindCall, KindCallResult, or "" for another kind
	actor string
	// ref is, for a call, the call.result it continues (0: none); for a
	// call.result, its call.
	ref uint64
	// inline says a call holds its own outcome (old logs): it opens
	// nothing.
	inline bool
}

// Add reads entry i; entries of other kinds are ignored. It fails on a
// call or call.result entry that does not parse ([ParseCall],
// [ParseCallResult]), on a call that continues an entry not before it,
// and on a call.result that does not end an earlier call of its actor that
// had no outcome yet.
func (t *CallTracker) Add(i uint64, e *Entry) error {
	l, err := entryLink(e)
	if err != nil {
		return err
	}
	return t.add(i, l)
}

// entryLink reads a parsed entry's callLink; an entry of another kind has
// none (kind "").
func entryLink(e *Entry) (callLink, error) {
	switch e.Kind {
	case KindCall:
		c, err := ParseCall(e)
		if err != nil {
			return callLink{}, err
		}
		return callLink{kind: KindCall, actor: e.Actor, ref: c.Continues, inline: c.Outcome != nil}, nil
	case KindCallResult:
		r, err := ParseCallResult(e)
		if err != nil {
			return callLink{}, err
		}
		return callLink{kind: KindCallResult, actor: e.Actor, ref: r.Call}, nil
	}
	return callLink{}, nil
}

// AddBytes reads entry i from its bytes as [CallTracker.Add] reads it
// parsed, without decoding it: it reads only the top-level members that
// pair calls with results ("kind", "actor", "continues", "call" and
// whether a call holds its outcome), skipping the rest unchecked. It is
// for following a log whose entries [Audit] checks: it fails on what
// [ParseEntry] would refuse only where it reads, and on a call whose
// other members [ParseCall] refuses it tracks the call all the same.
func (t *CallTracker) AddBytes(i uint64, b []byte) error {
	l, err := scanCallLink(b)
	if err != nil {
		return err
	}
	return t.add(i, l)
}

// add is the one rule for what opens and closes a call.
func (t *CallTracker) add(i uint64, l callLink) error {
	switch l.kind {
	case KindCall:
		t.n++
		if l.ref >= i {
			return fmt.Errorf("call %d continues entry %d, which is not an earlier one", i, l.ref)
		}
		if !l.inline {
			if t.open == nil {
				t.open = map[uint64]string{}
			}
			t.open[i] = l.actor
		}
	case KindCallResult:
		actor, ok := t.open[l.ref]
		if !ok {
			return fmt.Errorf("call.result %d cites entry %d, which is not an earlier call entry awaiting its outcome", i, l.ref)
		}
		if actor != l.actor {
			return fmt.Errorf("call.result %d is by %q, its call %d by %q", i, l.actor, l.ref, actor)
		}
		delete(t.open, l.ref)
	}
	return nil
}

// Calls returns the number of call entries read.
func (t *CallTracker) Calls() uint64 { return t.n }

// Open returns the indices of the calls without an outcome, in order: cut
// off by a crash or a kill, or still under way.
func (t *CallTracker) Open() []uint64 {
	out := make([]uint64, 0, len(t.open))
	for i := range t.open {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// IsOpen reports whether call entry i has no outcome (yet).
func (t *CallTracker) IsOpen(i uint64) bool {
	_, ok := t.open[i]
	return ok
}
