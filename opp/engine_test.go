package opp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

var ctx = context.Background()

func mustOK(tb testing.TB) func(*opp.Result, error) *opp.Result {
	return func(r *opp.Result, err error) *opp.Result {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return r
	}
}

func TestLifecycle(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)

	r := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "sequence the sample", Description: "all of it", OfferTo: "bob"}))
	id := r.Task.ID
	if len(id) != 34 || !strings.HasPrefix(id, "t_") {
		t.Fatalf("task id %q", id)
	}
	if got, want := r.Task.State, opp.StatePending; got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	if r.Task.Owner != "" || r.Task.Reservation != "bob" {
		t.Errorf("owner %q reservation %q, want none and bob", r.Task.Owner, r.Task.Reservation)
	}
	// The receipt proves the entry that was written.
	es, err := l.Entries(ctx, r.Index, r.Index+1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(log.LeafHash(es[0]), r.LeafHash) {
		t.Fatal("result leaf hash is not the entry's")
	}
	if _, err := r.Receipt.Verify(r.LeafHash, l.Verifier); err != nil {
		t.Fatalf("receipt does not verify: %v", err)
	}
	ent, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	if ent.Kind != opp.KindCreate || ent.Actor != "alice" || ent.Fields["task_id"] != id || ent.Fields["offer_to"] != "bob" {
		t.Fatalf("create entry %s", es[0])
	}

	mustOK(t)(e.Accept(ctx, "bob", id))
	call := appendCall(t, l, "bob")
	c := mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "done", Evidence: []uint64{call}}))
	if c.Task.State != opp.StateCompleted || c.Task.Owner != "bob" {
		t.Fatalf("after claim: %+v", c.Task)
	}
	st, err := e.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, ev := range st.History {
		kinds = append(kinds, ev.Kind)
		b, err := l.Entries(ctx, ev.Index, ev.Index+1)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(log.LeafHash(b[0])) != ev.LeafHash {
			t.Errorf("event %d leaf hash differs from the entry's", ev.Index)
		}
	}
	if got, want := strings.Join(kinds, " "), "task.create task.accept task.claim"; got != want {
		t.Errorf("history %q, want %q", got, want)
	}
	checkRebuild(t, l, e)
}

// fixture is a log with tasks in every state, and calls to cite.
type fixture struct {
	l *testLog
	e *opp.Engine

	pending, reserved, owned, completed, cancelled, handed string
	bobCallBefore, bobCallDuring, carolCall, aliceCall     uint64
	createEntry                                            uint64
}

func newFixture(t *testing.T) *fixture {
	l := newLog(t)
	e := newEngine(t, l)
	f := &fixture{l: l, e: e}
	create := func(actor, offer string) string {
		r := mustOK(t)(e.Create(ctx, actor, opp.CreateArgs{Title: "task", OfferTo: offer}))
		return r.Task.ID
	}
	f.pending = create("alice", "")
	f.reserved = create("alice", "carol")
	f.owned = create("alice", "")
	f.bobCallBefore = appendCall(t, l, "bob")
	f.createEntry = mustOK(t)(e.Accept(ctx, "bob", f.owned)).Index
	f.bobCallDuring = appendCall(t, l, "bob")
	f.carolCall = appendCall(t, l, "carol")
	f.aliceCall = appendCall(t, l, "alice")
	f.completed = create("alice", "")
	mustOK(t)(e.Accept(ctx, "bob", f.completed))
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.completed, Provenance: "reported", Summary: "done", Source: "carol"}))
	f.cancelled = create("alice", "")
	mustOK(t)(e.Cancel(ctx, "alice", f.cancelled, "not needed"))
	f.handed = create("alice", "")
	mustOK(t)(e.Accept(ctx, "bob", f.handed))
	mustOK(t)(e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.handed, To: "carol"}))
	return f
}

// TestRefusals checks every rule and adversarial input: each is refused
// with the named rule, and nothing is written.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	long := func(n int) string { return strings.Repeat("é", n) }
	missing := "t_" + strings.Repeat("0", 32)
	ev := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	claim := func(id, prov string, evidence ...uint64) opp.ClaimArgs {
		return opp.ClaimArgs{TaskID: id, Provenance: prov, Summary: "done", Evidence: evidence, Source: "x"}
	}
	e := f.e
	cases := []struct {
		name string
		rule string
		op   func() (*opp.Result, error)
	}{
		{"create: no actor", opp.RuleIdentity, func() (*opp.Result, error) { return e.Create(ctx, "", opp.CreateArgs{Title: "x"}) }},
		{"create: actor too long", opp.RuleIdentity, func() (*opp.Result, error) {
			return e.Create(ctx, strings.Repeat("a", 129), opp.CreateArgs{Title: "x"})
		}},
		{"create: no title", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Create(ctx, "alice", opp.CreateArgs{}) }},
		{"create: blank title", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Create(ctx, "alice", opp.CreateArgs{Title: " \n\t"}) }},
		{"create: title 201 chars", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Create(ctx, "alice", opp.CreateArgs{Title: long(201)}) }},
		{"create: title invalid UTF-8", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Create(ctx, "alice", opp.CreateArgs{Title: "a\xffb"}) }},
		{"create: description 4001 chars", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.Create(ctx, "alice", opp.CreateArgs{Title: "x", Description: long(4001)})
		}},
		{"create: huge description", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.Create(ctx, "alice", opp.CreateArgs{Title: "x", Description: strings.Repeat("x", 10<<20)})
		}},
		{"create: offer_to too long", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.Create(ctx, "alice", opp.CreateArgs{Title: "x", OfferTo: strings.Repeat("b", 129)})
		}},

		{"accept: unknown task", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.Accept(ctx, "bob", missing) }},
		{"accept: malformed id", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.Accept(ctx, "bob", "../../etc/passwd") }},
		{"accept: uppercase id", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.Accept(ctx, "bob", strings.ToUpper(f.pending)) }},
		{"accept: huge id", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.Accept(ctx, "bob", strings.Repeat("t", 1<<20)) }},
		{"accept: empty id", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Accept(ctx, "bob", "") }},
		{"accept: owned by another", opp.RuleOwned, func() (*opp.Result, error) { return e.Accept(ctx, "carol", f.owned) }},
		{"accept: already owner", opp.RuleAlreadyOwner, func() (*opp.Result, error) { return e.Accept(ctx, "bob", f.owned) }},
		{"accept: reserved for another", opp.RuleReserved, func() (*opp.Result, error) { return e.Accept(ctx, "bob", f.reserved) }},
		{"accept: reserved by handoff", opp.RuleReserved, func() (*opp.Result, error) { return e.Accept(ctx, "bob", f.handed) }},
		{"accept: after cancel", opp.RuleFinished, func() (*opp.Result, error) { return e.Accept(ctx, "carol", f.cancelled) }},
		{"accept: after completion", opp.RuleFinished, func() (*opp.Result, error) { return e.Accept(ctx, "carol", f.completed) }},

		{"claim: unknown task", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(missing, "reviewed")) }},
		{"claim: nobody owns it", opp.RuleNotOwner, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.pending, "reviewed")) }},
		{"claim: another actor's task", opp.RuleNotOwner, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "carol", claim(f.owned, "reviewed")) }},
		{"claim: creator is not owner", opp.RuleNotOwner, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "alice", claim(f.owned, "reviewed")) }},
		{"claim: cancelled", opp.RuleFinished, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "alice", claim(f.cancelled, "reviewed")) }},
		{"claim: provenance missing", opp.RuleProvenance, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "")) }},
		{"claim: provenance other case", opp.RuleProvenance, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "Observed")) }},
		{"claim: provenance padded", opp.RuleProvenance, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed ")) }},
		{"claim: provenance two values", opp.RuleProvenance, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed,reviewed"))
		}},
		{"claim: provenance unknown", opp.RuleProvenance, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "guessed")) }},
		{"claim: reported without source", opp.RuleSource, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "reported", Summary: "done", Source: "  "})
		}},
		{"claim: no summary", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "reviewed"})
		}},
		{"claim: summary 4001 chars", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "reviewed", Summary: long(4001)})
		}},
		{"claim: source 501 chars", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "reported", Summary: "s", Source: long(501)})
		}},
		{"claim: 65 evidence", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "reviewed", ev(65)...))
		}},
		{"claim: evidence twice", opp.RuleEvidence, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "reviewed", 1, 1)) }},
		{"claim: nonexistent evidence", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "reviewed", 1, 1<<40))
		}},
		{"claim: evidence past the end", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "reported", f.l.Size()))
		}},
		{"claim: max uint64 evidence", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "reported", ^uint64(0)))
		}},
		{"claim: observed cites a task entry", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed", f.createEntry))
		}},
		{"claim: observed cites genesis", opp.RuleEvidence, func() (*opp.Result, error) { return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed", 0)) }},
		{"claim: observed cites a foreign call", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed", f.carolCall))
		}},
		{"claim: observed cites own call before owning", opp.RuleEvidence, func() (*opp.Result, error) {
			return e.ReportCompletion(ctx, "bob", claim(f.owned, "observed", f.bobCallDuring, f.bobCallBefore))
		}},

		{"handoff: to self", opp.RuleHandoffTarget, func() (*opp.Result, error) { return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.owned, To: "bob"}) }},
		{"handoff: to nobody", opp.RuleHandoffTarget, func() (*opp.Result, error) { return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.owned}) }},
		{"handoff: to too long", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.owned, To: strings.Repeat("c", 129)})
		}},
		{"handoff: note 4001", opp.RuleInvalidArgument, func() (*opp.Result, error) {
			return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.owned, To: "carol", Note: long(4001)})
		}},
		{"handoff: not owner", opp.RuleNotOwner, func() (*opp.Result, error) {
			return e.Handoff(ctx, "carol", opp.HandoffArgs{TaskID: f.owned, To: "dave"})
		}},
		{"handoff: unowned", opp.RuleNotOwner, func() (*opp.Result, error) {
			return e.Handoff(ctx, "alice", opp.HandoffArgs{TaskID: f.pending, To: "dave"})
		}},
		{"handoff: completed", opp.RuleFinished, func() (*opp.Result, error) {
			return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.completed, To: "dave"})
		}},
		{"handoff: by previous owner", opp.RuleNotOwner, func() (*opp.Result, error) {
			return e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: f.handed, To: "dave"})
		}},

		{"release: not owner", opp.RuleNotOwner, func() (*opp.Result, error) { return e.Release(ctx, "carol", f.owned, "") }},
		{"release: unowned", opp.RuleNotOwner, func() (*opp.Result, error) { return e.Release(ctx, "alice", f.pending, "") }},
		{"release: completed", opp.RuleFinished, func() (*opp.Result, error) { return e.Release(ctx, "bob", f.completed, "") }},
		{"release: note too long", opp.RuleInvalidArgument, func() (*opp.Result, error) { return e.Release(ctx, "bob", f.owned, long(4001)) }},

		{"cancel: not creator", opp.RuleNotCreator, func() (*opp.Result, error) { return e.Cancel(ctx, "bob", f.owned, "") }},
		{"cancel: completed", opp.RuleFinished, func() (*opp.Result, error) { return e.Cancel(ctx, "alice", f.completed, "") }},
		{"cancel: twice", opp.RuleFinished, func() (*opp.Result, error) { return e.Cancel(ctx, "alice", f.cancelled, "") }},
		{"cancel: unknown", opp.RuleUnknownTask, func() (*opp.Result, error) { return e.Cancel(ctx, "alice", missing, "") }},
	}
	before := f.l.Size()
	stateBefore := mustState(t, e)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.op()
			if got := ruleOf(err); got != c.rule {
				t.Fatalf("got %q (%v), want rule %q", got, err, c.rule)
			}
			if msg := err.Error(); len(msg) > 2000 {
				t.Errorf("refusal message is %d bytes; it should be short", len(msg))
			}
			if got := f.l.Size(); got != before {
				t.Fatalf("log grew from %d to %d on a refusal", before, got)
			}
		})
	}
	if d := diffStates(stateBefore, mustState(t, e)); len(d) > 0 {
		t.Fatalf("refusals changed the state: %v", d)
	}
	checkRebuild(t, f.l, e)
}

func TestObservedEvidence(t *testing.T) {
	f := newFixture(t)
	e, l := f.e, f.l
	// bob's call while owning the task is fine.
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "observed", Summary: "ran it", Evidence: []uint64{f.bobCallDuring}}))

	// A call made during an earlier tenure still counts after re-accepting;
	// one made between tenures does not.
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "two tenures"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	first := appendCall(t, l, "bob")
	mustOK(t)(e.Release(ctx, "bob", id, "later"))
	between := appendCall(t, l, "bob")
	mustOK(t)(e.Accept(ctx, "bob", id))
	if _, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{between}}); ruleOf(err) != opp.RuleEvidence {
		t.Fatalf("citing a call made between tenures: %v", err)
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: "observed", Summary: "s", Evidence: []uint64{first}}))

	// Calls as the proxy records them: a call entry before the call is
	// forwarded, a call.result after. A call started before the accept
	// does not count, though it finished after; neither does its result.
	// One started during the tenure counts, cited by either entry.
	id3 := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "straddle"})).Task.ID
	early := appendCallStart(t, l, "bob")
	mustOK(t)(e.Accept(ctx, "bob", id3))
	earlyResult := appendCallResult(t, l, "bob", early)
	late := appendCallStart(t, l, "bob")
	lateResult := appendCallResult(t, l, "bob", late)
	for _, ev := range []uint64{early, earlyResult} {
		if _, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id3, Provenance: "observed", Summary: "s", Evidence: []uint64{ev}}); ruleOf(err) != opp.RuleEvidence {
			t.Fatalf("citing entry %d of a call started before the accept: %v", ev, err)
		}
	}
	mustOK(t)(e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id3, Provenance: "observed", Summary: "s", Evidence: []uint64{late, lateResult}}))

	// reviewed and reported may cite any existing entry, anyone's.
	id2 := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "review"})).Task.ID
	mustOK(t)(e.Accept(ctx, "carol", id2))
	mustOK(t)(e.ReportCompletion(ctx, "carol", opp.ClaimArgs{TaskID: id2, Provenance: "reviewed", Summary: "checked bob's run", Evidence: []uint64{0, f.bobCallDuring, f.createEntry}}))
	checkRebuild(t, l, e)
}

func TestCertaintyUpgrade(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	c1 := appendCall(t, l, "bob")
	c2 := appendCall(t, l, "bob")
	claim := func(prov string, ev ...uint64) error {
		_, err := e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: id, Provenance: prov, Summary: "s", Source: "carol", Evidence: ev})
		return err
	}
	steps := []struct {
		prov string
		ev   []uint64
		rule string
	}{
		{"reported", []uint64{c1}, ""},
		{"reviewed", []uint64{c1}, opp.RuleUpgrade}, // more certain, nothing new
		{"reviewed", nil, opp.RuleUpgrade},          // more certain, no evidence at all
		{"reviewed", []uint64{c1, c2}, ""},          // c2 is new
		{"observed", []uint64{c2, c1}, opp.RuleUpgrade},
		{"reported", nil, ""},                       // less certain: always allowed
		{"reported", nil, ""},                       // as certain: allowed
		{"observed", []uint64{c1}, opp.RuleUpgrade}, // up from the previous claim, c1 is not new
	}
	for i, s := range steps {
		before := l.Size()
		err := claim(s.prov, s.ev...)
		if got := ruleOf(err); got != s.rule {
			t.Fatalf("step %d (%s %v): got %q (%v), want %q", i, s.prov, s.ev, got, err, s.rule)
		}
		if err != nil && l.Size() != before {
			t.Fatalf("step %d: refused but wrote", i)
		}
	}
	// A call.result stands for its call: citing the result of a call
	// cited before, or the call of a result cited before, is not new.
	c3 := appendCallStart(t, l, "bob")
	r3 := appendCallResult(t, l, "bob", c3)
	c4 := appendCallStart(t, l, "bob")
	r4 := appendCallResult(t, l, "bob", c4)
	upgrades := []struct {
		prov string
		ev   []uint64
		rule string
	}{
		{"reported", []uint64{c3, r4}, ""},
		{"reviewed", []uint64{r3}, opp.RuleUpgrade},
		{"reviewed", []uint64{c4}, opp.RuleUpgrade},
		{"observed", []uint64{r3, c4}, opp.RuleUpgrade},
	}
	for i, s := range upgrades {
		before := l.Size()
		if got := ruleOf(claim(s.prov, s.ev...)); got != s.rule || s.rule != "" && l.Size() != before {
			t.Fatalf("upgrade %d (%s %v): got %q, want %q; size %d -> %d", i, s.prov, s.ev, got, s.rule, before, l.Size())
		}
	}
	// New evidence unlocks the upgrade; the task stays completed.
	c5 := appendCall(t, l, "bob")
	if err := claim("observed", r3, c5); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Status(ctx, id)
	if st.State != opp.StateCompleted || st.Owner != "bob" {
		t.Fatalf("state %s owner %s", st.State, st.Owner)
	}
	checkRebuild(t, l, e)
}

func claimOn(e *opp.Engine, actor, id, prov string, ev ...uint64) error {
	_, err := e.ReportCompletion(ctx, actor, opp.ClaimArgs{TaskID: id, Provenance: prov, Summary: "s", Source: "someone", Evidence: ev})
	return err
}

func TestHandoffSnapshot(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	acc := mustOK(t)(e.Accept(ctx, "bob", id))
	h := mustOK(t)(e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: id, To: "carol", Note: "over to you"}))
	if h.Task.Owner != "" || h.Task.Reservation != "carol" || h.Task.State != opp.StatePending {
		t.Fatalf("after handoff: %+v", h.Task)
	}
	st, _ := e.Status(ctx, id)
	snap := st.History[len(st.History)-1].Snapshot
	if snap == nil {
		t.Fatal("handoff event has no snapshot")
	}
	want := opp.Snapshot{State: string(opp.StateAccepted), Owner: "bob", HistoryHead: opp.EntryRef{Index: acc.Index, LeafHash: hex.EncodeToString(acc.LeafHash)}, Claims: []opp.ClaimRef{}}
	if snap.State != want.State || snap.Owner != want.Owner || snap.HistoryHead != want.HistoryHead || len(snap.Claims) != 0 {
		t.Fatalf("snapshot %+v, want %+v", snap, want)
	}
	// Only carol may accept; she owns it then.
	if _, err := e.Accept(ctx, "dave", id); ruleOf(err) != opp.RuleReserved {
		t.Fatalf("dave accepting: %v", err)
	}
	if _, err := e.Accept(ctx, "bob", id); ruleOf(err) != opp.RuleReserved {
		t.Fatalf("bob re-accepting: %v", err)
	}
	mustOK(t)(e.Accept(ctx, "carol", id))
	mustOK(t)(e.ReportCompletion(ctx, "carol", opp.ClaimArgs{TaskID: id, Provenance: "reviewed", Summary: "s"}))
	checkRebuild(t, l, e)
	es, _ := l.Entries(ctx, h.Index, h.Index+1)
	ent, _ := log.ParseEntry(es[0])
	if _, ok := ent.Fields["snapshot"].(map[string]any); !ok {
		t.Fatalf("handoff entry has no snapshot object: %s", es[0])
	}
}

func TestListUnaccepted(t *testing.T) {
	f := newFixture(t)
	e := f.e
	released := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "r"})).Task.ID
	mustOK(t)(e.Accept(ctx, "dave", released))
	mustOK(t)(e.Release(ctx, "dave", released, "cannot do it"))
	var got []string
	for _, s := range unaccepted(t, e) {
		got = append(got, s.ID)
		if s.Owner != "" {
			t.Errorf("listed task %s has owner %s", s.ID, s.Owner)
		}
	}
	want := []string{f.pending, f.reserved, f.handed, released}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("unaccepted %v, want %v (oldest first)", got, want)
	}
	// A limit lists the oldest, and total counts them all.
	for limit := 1; limit <= len(want); limit++ {
		list, total, err := e.ListUnaccepted(ctx, limit)
		if err != nil || total != len(want) || len(list) != limit {
			t.Fatalf("limit %d: %d listed of %d (%v), want %d of %d", limit, len(list), total, err, limit, len(want))
		}
		for k, s := range list {
			if s.ID != want[k] {
				t.Fatalf("limit %d: listed %d is %s, want %s", limit, k, s.ID, want[k])
			}
		}
	}
	checkRebuild(t, f.l, e)
}

func TestCancel(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t", OfferTo: "bob"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	r := mustOK(t)(e.Cancel(ctx, "alice", id, "plans changed"))
	if r.Task.State != opp.StateCancelled || r.Task.Owner != "" || r.Task.Reservation != "" {
		t.Fatalf("after cancel: %+v", r.Task)
	}
	for _, err := range []error{
		func() error { _, err := e.Accept(ctx, "bob", id); return err }(),
		func() error { return claimOn(e, "bob", id, "reviewed") }(),
		func() error { _, err := e.Release(ctx, "bob", id, ""); return err }(),
		func() error { _, err := e.Handoff(ctx, "bob", opp.HandoffArgs{TaskID: id, To: "carol"}); return err }(),
	} {
		if ruleOf(err) != opp.RuleFinished {
			t.Errorf("after cancel: %v, want %s", err, opp.RuleFinished)
		}
	}
	checkRebuild(t, l, e)
}

func TestClaimLimit(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	mustOK(t)(e.Accept(ctx, "bob", id))
	for range opp.MaxClaims {
		if err := claimOn(e, "bob", id, "reported"); err != nil {
			t.Fatal(err)
		}
	}
	if err := claimOn(e, "bob", id, "reported"); ruleOf(err) != opp.RuleLimit {
		t.Fatalf("claim %d: %v", opp.MaxClaims+1, err)
	}
	checkRebuild(t, l, e)
}

// TestEntrySizeBound checks that the largest inputs still fit an entry,
// handoff snapshot with the most claims included.
func TestEntrySizeBound(t *testing.T) {
	l := newLog(t)
	e := newEngine(t, l)
	big := strings.Repeat("\U0001F600", opp.MaxText) // 4 bytes each
	actor := strings.Repeat("a", opp.MaxActor)
	id := mustOK(t)(e.Create(ctx, actor, opp.CreateArgs{Title: strings.Repeat("\U0001F600", opp.MaxTitle), Description: big, OfferTo: strings.Repeat("b", opp.MaxActor)})).Task.ID
	mustOK(t)(e.Accept(ctx, strings.Repeat("b", opp.MaxActor), id))
	owner := strings.Repeat("b", opp.MaxActor)
	mustOK(t)(e.Release(ctx, owner, id, big))
	mustOK(t)(e.Accept(ctx, owner, id))
	if _, err := e.ReportCompletion(ctx, owner, opp.ClaimArgs{TaskID: id, Provenance: "reported", Summary: big, Source: strings.Repeat("\U0001F600", opp.MaxSource), Evidence: []uint64{0}}); err != nil {
		t.Fatal(err)
	}
	checkRebuild(t, l, e)
}

func TestFormat(t *testing.T) {
	f := newFixture(t)
	mustOK(t)(f.e.ReportCompletion(ctx, "bob", opp.ClaimArgs{TaskID: f.owned, Provenance: "observed", Summary: "line one\nline two", Evidence: []uint64{f.bobCallDuring}}))
	var b bytes.Buffer
	st := mustState(t, f.e)
	if err := opp.FormatList(&b, f.e.All(ctx), st.Tasks[0].Created.Add(90e9)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("list:\n%s", out)
	for _, want := range []string{"TASK", "RESERVED FOR", f.pending, "pending_acceptance", "cancelled", "completed", "1m"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	task, _ := f.e.Status(ctx, f.owned)
	if err := opp.FormatTask(&b, task); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{"Task " + f.owned, "task.create", "task.accept", "task.claim", "provenance  observed", `line one\nline two`, "leaf hash", "#" + itoa(f.bobCallDuring)} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	task, _ = f.e.Status(ctx, f.handed)
	opp.FormatTask(&b, task)
	t.Logf("show:\n%s", b.String())
	if !strings.Contains(b.String(), "snapshot    state accepted, owner bob") {
		t.Errorf("handoff snapshot not shown:\n%s", b.String())
	}
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

// failingLog fails appends once fail is set.
type failingLog struct {
	*testLog
	fail error
}

func (f *failingLog) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	return f.testLog.Append(ctx, entry)
}

// TestAppendFailure: a cancelled context writes nothing and changes
// nothing; a failed append stops the engine from writing (the log may or
// may not hold the entry), and reads keep working.
func TestAppendFailure(t *testing.T) {
	fl := &failingLog{testLog: newLog(t)}
	e, err := opp.Open(ctx, fl, fl.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "t"})).Task.ID
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Accept(cctx, "bob", id); !errors.Is(err, context.Canceled) {
		t.Fatalf("accept with a cancelled context: %v", err)
	}
	if e.Err() != nil {
		t.Fatal("a cancelled context stopped the engine")
	}
	fl.fail = errors.New("disk on fire")
	if _, err := e.Accept(ctx, "bob", id); err == nil || ruleOf(err) == "" {
		t.Fatalf("accept on a failing log: %v", err)
	}
	if e.Err() == nil {
		t.Fatal("engine still writing after a failed append")
	}
	fl.fail = nil
	if _, err := e.Accept(ctx, "bob", id); err == nil {
		t.Fatal("engine wrote after a failed append")
	}
	st, err := e.Status(ctx, id)
	if err != nil || st.Owner != "" {
		t.Fatalf("status after failure: %+v %v", st, err)
	}
	checkRebuild(t, fl.testLog, e)
}

// concurrentMixed runs TestConcurrentMixed with a cache bound (0: the
// default; 1: one task, so readers and writers rebuild tasks from the log
// all the time).
func concurrentMixed(t *testing.T, cache int64) {
	l := newLog(t)
	e, err := opp.Open(ctx, l, l.Size(), &opp.Options{CacheBytes: cache})
	if err != nil {
		t.Fatal(err)
	}
	shared := mustOK(t)(e.Create(ctx, "alice", opp.CreateArgs{Title: "shared"})).Task.ID
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.ListUnaccepted(ctx, 1000)
				for _, err := range e.All(ctx) {
					if err != nil {
						t.Errorf("All: %v", err)
					}
				}
				if st, err := e.Status(ctx, shared); err != nil || len(st.History) == 0 {
					t.Errorf("status: %v", err)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me, next := "w"+strconv.Itoa(w), "w"+strconv.Itoa((w+1)%8)
			for range 20 {
				id := mustOK(t)(e.Create(ctx, me, opp.CreateArgs{Title: "own"})).Task.ID
				mustOK(t)(e.Accept(ctx, me, id))
				mustOK(t)(e.Handoff(ctx, me, opp.HandoffArgs{TaskID: id, To: next}))
				e.Accept(ctx, me, shared) // contended; may win or be refused
				if _, err := e.Release(ctx, me, shared, ""); err != nil && ruleOf(err) != opp.RuleNotOwner {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	checkRebuild(t, l, e)
	if n := len(unaccepted(t, e)); n != 8*20+1 {
		t.Fatalf("%d unaccepted tasks, want %d", n, 8*20+1)
	}
}
