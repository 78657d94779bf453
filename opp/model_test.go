package opp_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
)

// The model-based test drives the engine with random operations by four
// actors on a few tasks, interleaved with call entries appended straight to
// the log (to cite as evidence), and checks every outcome against a small
// reference model. After every step the six invariants of the issue hold,
// and the state rebuilt from the log alone equals the live state.

var modelActors = []string{"ann", "ben", "cat", "dan"}

type mTenure struct {
	actor    string
	from, to uint64
	open     bool
}

type mTask struct {
	id, creator     string
	state           opp.TaskState
	owner, reserved string
	tenures         []mTenure
	last            map[string]int
	cited           map[string]map[uint64]bool
	claims          int
}

type model struct {
	tasks  map[string]*mTask
	ids    []string
	kinds  []string // kind of every log entry, by index
	actors []string // actor of every log entry, by index
	// backs is the task each call cited by an observed claim is
	// evidence for ("*": more than one).
	backs map[uint64]string
}

var rank = map[string]int{"reported": 1, "reviewed": 2, "observed": 3}

type mOp struct {
	kind   string // create accept claim handoff release cancel call
	actor  string
	task   string
	title  string
	offer  string
	prov   string
	source string
	ev     []uint64
	to     string
}

func (o mOp) String() string {
	type plain mOp
	return fmt.Sprintf("%s by %s on %s %+v", o.kind, o.actor, o.task, plain(o))
}

// predict says which rule refuses o, or "" if it succeeds.
func (m *model) predict(o mOp) string {
	size := uint64(len(m.kinds))
	switch o.kind {
	case "create":
		if strings.TrimSpace(o.title) == "" {
			return opp.RuleInvalidArgument
		}
		return ""
	case "claim":
		if rank[o.prov] == 0 {
			return opp.RuleProvenance
		}
		if o.prov == "reported" && o.source == "" {
			return opp.RuleSource
		}
		if len(o.ev) > opp.MaxEvidence {
			return opp.RuleInvalidArgument
		}
		seen := map[uint64]bool{}
		for _, i := range o.ev {
			if seen[i] {
				return opp.RuleEvidence
			}
			seen[i] = true
		}
		if o.prov == "observed" && len(o.ev) == 0 {
			return opp.RuleEvidence // checked when written, before the task
		}
	case "handoff":
		if o.to == "" || o.to == o.actor {
			return opp.RuleHandoffTarget
		}
	}
	t := m.tasks[o.task]
	if t == nil {
		return opp.RuleUnknownTask
	}
	if t.state == opp.StateCancelled || (t.state == opp.StateCompleted && o.kind != "claim") {
		return opp.RuleFinished
	}
	switch o.kind {
	case "accept":
		switch {
		case t.owner == o.actor:
			return opp.RuleAlreadyOwner
		case t.owner != "":
			return opp.RuleOwned
		case t.reserved != "" && t.reserved != o.actor:
			return opp.RuleReserved
		}
		return ""
	case "cancel":
		if t.creator != o.actor {
			return opp.RuleNotCreator
		}
		return ""
	}
	if t.owner != o.actor {
		return opp.RuleNotOwner
	}
	if o.kind != "claim" {
		return ""
	}
	if t.claims >= opp.MaxClaims {
		return opp.RuleLimit
	}
	for _, i := range o.ev {
		if i >= size {
			return opp.RuleEvidence
		}
		if o.prov != "observed" {
			continue
		}
		if m.kinds[i] != log.KindCall || m.actors[i] != o.actor {
			return opp.RuleEvidence
		}
		in := false
		for _, te := range t.tenures {
			if te.actor == o.actor && i > te.from && (te.open || i < te.to) {
				in = true
			}
		}
		if !in {
			return opp.RuleEvidence
		}
	}
	if prev, ok := t.last[o.actor]; ok && prev < rank[o.prov] {
		fresh := false
		for _, i := range o.ev {
			if !t.cited[o.actor][i] {
				fresh = true
			}
		}
		if !fresh {
			return opp.RuleUpgrade
		}
	}
	if o.prov == "observed" {
		for _, i := range o.ev {
			if b, ok := m.backs[i]; ok && b != o.task {
				return opp.RuleEvidence // checked when written, after the rules
			}
		}
	}
	return ""
}

// apply records the effect of a successful o written at index.
func (m *model) apply(o mOp, index uint64, id string) {
	kind := "task." + o.kind
	if o.kind == "call" {
		kind = log.KindCall
	}
	m.kinds = append(m.kinds, kind)
	m.actors = append(m.actors, o.actor)
	t := m.tasks[o.task]
	end := func() {
		for k := range t.tenures {
			if t.tenures[k].open {
				t.tenures[k].open, t.tenures[k].to = false, index
			}
		}
	}
	switch o.kind {
	case "create":
		m.tasks[id] = &mTask{id: id, creator: o.actor, state: opp.StatePending, reserved: o.offer,
			last: map[string]int{}, cited: map[string]map[uint64]bool{}}
		m.ids = append(m.ids, id)
	case "accept":
		t.owner, t.reserved, t.state = o.actor, "", opp.StateAccepted
		t.tenures = append(t.tenures, mTenure{actor: o.actor, from: index, open: true})
	case "claim":
		t.claims++
		t.last[o.actor] = rank[o.prov]
		if t.cited[o.actor] == nil {
			t.cited[o.actor] = map[uint64]bool{}
		}
		for _, i := range o.ev {
			t.cited[o.actor][i] = true
			if o.prov != "observed" {
				continue
			}
			if m.backs == nil {
				m.backs = map[uint64]string{}
			}
			if b, ok := m.backs[i]; ok && b != o.task {
				m.backs[i] = "*"
			} else {
				m.backs[i] = o.task
			}
		}
		if t.state == opp.StateAccepted {
			t.state = opp.StateCompleted
		}
	case "handoff":
		end()
		t.owner, t.reserved, t.state = "", o.to, opp.StatePending
	case "release":
		end()
		t.owner, t.reserved, t.state = "", "", opp.StatePending
	case "cancel":
		end()
		t.owner, t.reserved, t.state = "", "", opp.StateCancelled
	}
}

// randomOp picks an operation, biased towards ones that can succeed.
func (m *model) randomOp(r *rand.Rand) mOp {
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	o := mOp{actor: pick(modelActors)}
	if len(m.ids) > 0 && r.IntN(12) > 0 {
		o.task = m.ids[r.IntN(len(m.ids))]
		if t := m.tasks[o.task]; t.owner != "" && r.IntN(3) > 0 {
			o.actor = t.owner // owners act more often
		}
	} else {
		o.task = "t_" + hex.EncodeToString([]byte(fmt.Sprint(r.Int64())))[:32]
		if len(o.task) < 34 {
			o.task += strings.Repeat("0", 34-len(o.task))
		}
	}
	switch n := r.IntN(100); {
	case n < 12 || len(m.ids) == 0:
		o.kind = "create"
		o.title = pick([]string{"build it", "check it", "test it", "ship it", "", "  "})
		if r.IntN(3) == 0 {
			o.offer = pick(modelActors)
		}
	case n < 30:
		o.kind = "accept"
	case n < 55:
		o.kind = "claim"
		o.prov = pick([]string{"observed", "observed", "observed", "reviewed", "reviewed", "reported", "reported", "", "Observed", "observed reviewed"})
		if r.IntN(4) > 0 {
			o.source = "someone"
		}
		size := uint64(len(m.kinds))
		for range r.IntN(4) {
			if r.IntN(2) == 0 {
				// one of the actor's own calls
				var own []uint64
				for i, k := range m.kinds {
					if k == log.KindCall && m.actors[i] == o.actor {
						own = append(own, uint64(i))
					}
				}
				if len(own) > 0 {
					o.ev = append(o.ev, own[r.IntN(len(own))])
					continue
				}
			}
			o.ev = append(o.ev, r.Uint64N(size+2))
		}
	case n < 65:
		o.kind = "handoff"
		o.to = pick(append([]string{""}, modelActors...))
	case n < 73:
		o.kind = "release"
	case n < 78:
		o.kind = "cancel"
	default:
		o.kind = "call"
	}
	return o
}

func run(e *opp.Engine, l *testLog, o mOp) (*opp.Result, error) {
	switch o.kind {
	case "create":
		return e.Create(ctx, o.actor, opp.CreateArgs{Title: o.title, OfferTo: o.offer})
	case "accept":
		return e.Accept(ctx, o.actor, o.task)
	case "claim":
		return e.ReportCompletion(ctx, o.actor, opp.ClaimArgs{TaskID: o.task, Provenance: o.prov, Summary: "did " + o.task, Evidence: o.ev, Source: o.source})
	case "handoff":
		return e.Handoff(ctx, o.actor, opp.HandoffArgs{TaskID: o.task, To: o.to})
	case "release":
		return e.Release(ctx, o.actor, o.task, "")
	case "cancel":
		return e.Cancel(ctx, o.actor, o.task, "")
	}
	panic(o.kind)
}

func TestModel(t *testing.T) {
	steps := 300
	if testing.Short() {
		steps = 60
	}
	outcomes := map[string]int{}
	// Even seeds run with a cache of one task, so that nearly every
	// operation rebuilds its task from the log.
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			l := newLog(t)
			opts := &opp.Options{}
			if seed%2 == 0 {
				opts.CacheBytes = 1
			}
			e, err := opp.Open(ctx, l, l.Size(), opts)
			if err != nil {
				t.Fatal(err)
			}
			m := &model{tasks: map[string]*mTask{}, kinds: []string{log.KindGenesis}, actors: []string{"provlog"}}
			owners := map[string]string{}
			for step := range steps {
				o := m.randomOp(r)
				before := l.Size()
				if o.kind == "call" {
					m.apply(o, appendCall(t, l, o.actor), "")
					continue
				}
				want := m.predict(o)
				res, err := run(e, l, o)
				got := ruleOf(err)
				if got != want {
					t.Fatalf("step %d: %s: engine says %q (%v), model says %q", step, o, got, err, want)
				}
				outcomes[o.kind+":"+got]++
				if err != nil {
					if l.Size() != before {
						t.Fatalf("step %d: %s was refused but the log grew", step, o)
					}
				} else {
					if res.Index != before || l.Size() != before+1 {
						t.Fatalf("step %d: %s wrote index %d, log %d -> %d", step, o, res.Index, before, l.Size())
					}
					m.apply(o, res.Index, res.Task.ID)
				}
				checkInvariants(t, step, l, e, m, owners, o, err == nil)
			}
		})
	}
	t.Logf("outcomes: %v", outcomes)
	for _, k := range []string{"accept:", "claim:", "handoff:", "release:", "cancel:", "claim:" + opp.RuleUpgrade, "claim:" + opp.RuleEvidence, "accept:" + opp.RuleReserved, "accept:" + opp.RuleOwned} {
		if outcomes[k] == 0 {
			t.Errorf("the random walk never produced %q; adjust the biases", k)
		}
	}
}

// checkInvariants checks the six invariants after one step.
func checkInvariants(t *testing.T, step int, l *testLog, e *opp.Engine, m *model, owners map[string]string, o mOp, ok bool) {
	t.Helper()
	fail := func(inv int, format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (%s): invariant %d: %s", step, o, inv, fmt.Sprintf(format, args...))
	}
	live := mustState(t, e)
	// 6: the history is reconstructable from the log alone, and agrees
	// with the reference model.
	rebuilt := rebuildState(t, l, l.Size())
	if d := diffStates(live, rebuilt); len(d) > 0 {
		fail(6, "rebuilt state differs from the live state: %v", d)
	}
	if len(rebuilt.Violations) > 0 {
		fail(6, "the engine wrote rule-breaking entries: %v", rebuilt.Violations)
	}
	if len(live.Tasks) != len(m.tasks) {
		fail(6, "%d tasks, model has %d", len(live.Tasks), len(m.tasks))
	}
	entries, err := l.Entries(ctx, 0, l.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range live.Tasks {
		mt := m.tasks[tk.ID]
		if mt == nil || tk.State != mt.state || tk.Owner != mt.owner || tk.Reservation != mt.reserved || tk.Creator != mt.creator {
			fail(6, "task %s is %s/%q/%q, model says %+v", tk.ID, tk.State, tk.Owner, tk.Reservation, mt)
		}
		for _, ev := range tk.History {
			if hex.EncodeToString(log.LeafHash(entries[ev.Index])) != ev.LeafHash {
				fail(6, "event %d's leaf hash is not its entry's", ev.Index)
			}
		}
		// 1: zero or one owner, and an owner exactly when accepted or
		// completed. Open tenures, from the history, number at most one.
		if (tk.Owner != "") != (tk.State == opp.StateAccepted || tk.State == opp.StateCompleted) {
			fail(1, "task %s is %s with owner %q", tk.ID, tk.State, tk.Owner)
		}
		open := 0
		for _, ev := range tk.History {
			switch ev.Kind {
			case opp.KindAccept:
				open++
			case opp.KindHandoff, opp.KindRelease:
				open--
			case opp.KindCancel:
				open = 0
			}
			if open > 1 || open < 0 {
				fail(1, "task %s has %d owners after entry %d", tk.ID, open, ev.Index)
			}
		}
		// 2: ownership changes only through acceptance.
		if prev := owners[tk.ID]; tk.Owner != "" && tk.Owner != prev {
			if !ok || o.kind != "accept" || o.task != tk.ID || o.actor != tk.Owner {
				fail(2, "task %s went from owner %q to %q by %s", tk.ID, prev, tk.Owner, o)
			}
		}
		owners[tk.ID] = tk.Owner
		// 4: no upgrade of certainty without new evidence; 5: every handoff
		// carries the snapshot of the state before it.
		last := map[string]int{}
		cited := map[string]map[uint64]bool{}
		var claims []opp.ClaimRef
		for k, ev := range tk.History {
			switch ev.Kind {
			case opp.KindClaim:
				if p, seen := last[ev.Actor]; seen && p < rank[string(ev.Provenance)] {
					fresh := false
					for _, i := range ev.Evidence {
						fresh = fresh || !cited[ev.Actor][i]
					}
					if !fresh {
						fail(4, "claim %d upgrades %s's certainty without new evidence", ev.Index, ev.Actor)
					}
				}
				last[ev.Actor] = rank[string(ev.Provenance)]
				if cited[ev.Actor] == nil {
					cited[ev.Actor] = map[uint64]bool{}
				}
				for _, i := range ev.Evidence {
					cited[ev.Actor][i] = true
				}
				claims = append(claims, opp.ClaimRef{Index: ev.Index, LeafHash: ev.LeafHash, Actor: ev.Actor, Provenance: string(ev.Provenance)})
			case opp.KindHandoff:
				s := ev.Snapshot
				prev := tk.History[k-1]
				if s == nil || s.Owner != ev.Actor || s.State != string(opp.StateAccepted) ||
					s.HistoryHead != (opp.EntryRef{Index: prev.Index, LeafHash: prev.LeafHash}) || !slices.Equal(s.Claims, claims) {
					fail(5, "handoff %d carries snapshot %+v", ev.Index, s)
				}
			}
		}
	}
	// 3: exactly one provenance per claim, read from the raw entries.
	for i, b := range entries {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if string(raw["kind"]) != `"task.claim"` {
			continue
		}
		var p string
		if err := json.Unmarshal(raw["provenance"], &p); err != nil || rank[p] == 0 {
			fail(3, "claim entry %d has provenance %s", i, raw["provenance"])
		}
	}
}
