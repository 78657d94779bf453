package opp

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log"
)

// One call, one task. A call entry names no task, so a call an actor made
// while it owned two tasks at once is, by the tenure rule alone, a call
// made for either. An observed claim says the claimant saw the work of
// this task done in its own calls; if the same call could stand for two
// tasks, one observation would complete both. So a call (or a
// call.result, which stands for its call) that an observed claim cites
// is that task's evidence, and an observed claim on another task may not
// cite it. Like the visible-text and growth rules (checkNew,
// checkGrowth), this is checked when a claim is written, not when the
// log is rebuilt: a log an older provlog wrote, in which one call backs
// observed claims on two tasks, rebuilds and audits as it did.
//
// The engine keeps, for every call cited by an observed claim in the log,
// the task it backs (taskSet.observed): about 12 bytes and a map slot a
// cited call, at most MaxEvidence a claim, saved with the task index
// (snapshot.go).

// On a shared log the reservation below holds only within one engine, so
// an observed claim is appended fenced on its task and on each call it
// cites (CallKey; log.Fence.Also): of two sidecars claiming two tasks on
// one call at once, the store commits one, and the other, fenced off,
// reads the log again and its rule refuses the claim (shared.go). A
// sidecar of an older provlog fences on the task alone: against it the
// race stays open.

// callKeyPrefix starts the fence key of a call an observed claim cites.
const callKeyPrefix = "call:"

// CallKey is the fence key under which an observed claim citing the call
// at log index call is appended to a shared log (log.Fence).
func CallKey(call uint64) string { return callKeyPrefix + strconv.FormatUint(call, 10) }

// ParseCallKey returns the call a fence key names, or false if key is not
// a call's key exactly as CallKey writes it.
func ParseCallKey(key string) (uint64, bool) {
	s, ok := strings.CutPrefix(key, callKeyPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || CallKey(n) != key {
		return 0, false
	}
	return n, true
}

// callKeys returns the fence keys of the calls r stands on, if it is an
// observed claim.
func callKeys(r *record) []string {
	if r.kind != KindClaim || r.provenance != Observed || len(r.calls) == 0 {
		return nil
	}
	keys := make([]string, len(r.calls))
	for i, c := range r.calls {
		keys[i] = CallKey(c)
	}
	return keys
}

// manyTasks marks a call that observed claims on more than one task cite
// (written by an older provlog): it is no longer evidence for any task.
const manyTasks = ^uint32(0)

// noteObserved records the calls r, an observed claim on task n that
// passed the rules, stands on. The caller holds s.mu.
func (s *taskSet) noteObserved(n uint32, r *record) {
	if r.kind != KindClaim || r.provenance != Observed {
		return
	}
	if s.observed == nil && len(r.calls) > 0 {
		s.observed = make(map[uint64]uint32)
	}
	for _, c := range r.calls {
		if m, ok := s.observed[c]; ok && m != n {
			n := manyTasks
			s.observed[c] = n
			continue
		}
		s.observed[c] = n
	}
}

// claimCalls checks that no call r, an observed claim on t that passed
// check, stands on is evidence for another task, and reserves those that
// are evidence for none yet for t, so that a claim on another task
// written meanwhile cannot cite them too. release gives the reservations
// back when r is not written; once it is, apply keeps them.
func (s *taskSet) claimCalls(t *task, r *record) (release func(), _ *log.ProblemsError) {
	release = func() {}
	if r.kind != KindClaim || r.provenance != Observed || len(r.calls) == 0 {
		return release, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.idx.lookup(t.ID)
	if !ok {
		return release, nil // apply reports it
	}
	for k, c := range r.calls {
		m, ok := s.observed[c]
		if !ok || m == n {
			continue
		}
		other := "more than one other task"
		if m != manyTasks {
			key := s.idx.keys.at(m)
			other = "task t_" + hex.EncodeToString(key[:])
		}
		return release, Refuse(RuleEvidence, "evidence entry %d is your call %d, which an observed claim on %s already cites: a call names no task, so it is observed evidence for one task only. Cite calls you made for task %s, or claim provenance reviewed", r.evidence[k], c, other, t.ID)
	}
	if s.observed == nil {
		s.observed = make(map[uint64]uint32)
	}
	var mine []uint64
	for _, c := range r.calls {
		if _, ok := s.observed[c]; !ok {
			s.observed[c] = n
			mine = append(mine, c)
		}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range mine {
			if s.observed[c] == n {
				delete(s.observed, c)
			}
		}
	}, nil
}
