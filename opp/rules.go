package opp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/provlog/provlog/log"
)

// task is the state of one task, derived from its entries.
type task struct {
	// mu guards the task while apply changes it (taskset.go).
	mu sync.RWMutex
	Task
	// bytes is the size of its entries, for the cache's bound.
	bytes int64
	// tenures are the ownership intervals: owner from the accept entry
	// (from) to the entry that ended the ownership (to), open while owned.
	tenures []tenure
	claims  []ClaimRef
	// last is each actor's most recent claim provenance; cited is the set
	// of indices each actor has cited on this task.
	last  map[string]Provenance
	cited map[string]map[uint64]bool
	// calls maps cited entries to the calls they stand for (citedCall),
	// as the upgrade rule learns them, so that each is read once, not at
	// every upgrade. Entries never change, so it is never stale; memo
	// guards it, since two checks of one task may run at once on a shared
	// log (the writer's and the reader's of others' entries).
	memo  sync.Mutex
	calls map[uint64]uint64
}

type tenure struct {
	actor    string
	from, to uint64
	open     bool
}

// checkText checks a caller-supplied string: valid UTF-8 and at most max
// characters; required ones must not be blank.
func checkText(name, s string, max int, required bool) *log.ProblemsError {
	if !utf8.ValidString(s) {
		return Refuse(RuleInvalidArgument, "%s is not valid UTF-8", name)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return Refuse(RuleInvalidArgument, "%s is %d characters, over the limit of %d; shorten it", name, n, max)
	}
	if required && strings.TrimSpace(s) == "" {
		return Refuse(RuleInvalidArgument, "%s is required and must not be blank", name)
	}
	return nil
}

// checkNew checks what a request must hold to be written now, beyond the
// rules entries already in the log are judged by (check): an entry
// written by an older provlog keeps its verdict in an audit whatever is
// added here. Required texts must show something: a title or summary
// of spaces and characters that show as nothing (zero-width, format or
// control characters, fillers) alone is blank to anyone reading it, and
// so is such a source.
func checkNew(r *record) *log.ProblemsError {
	blank := func(name string) *log.ProblemsError {
		return Refuse(RuleInvalidArgument, "%s has no visible character (only spaces, or zero-width, blank or control characters); write something a reader can see", name)
	}
	switch r.kind {
	case KindCreate:
		if !visible(r.title) {
			return blank("title")
		}
	case KindClaim:
		if !visible(r.summary) {
			return blank("summary")
		}
		if r.provenance == Observed && len(r.evidence) == 0 {
			return Refuse(RuleEvidence, "an observed claim must cite evidence: at least one of your own calls that finished while you owned the task (the index in the call's receipt, or its call entry). If you did not see the work done in your own calls, use provenance reviewed (you checked someone else's work) or reported (someone told you; name them in source)")
		}
		if r.provenance == Reported && !visible(r.source) {
			return Refuse(RuleSource, "a reported claim must name its source (who told you) in source, in visible characters; or, if you saw or checked it yourself, use provenance observed or reviewed")
		}
	}
	return nil
}

// checkGrowth checks what a request on t must hold to be written now,
// beyond check, as checkNew does: a task that holds MaxEntries entries
// takes no more accepts, handoffs or releases, only what ends it (its
// owner's claims, up to MaxClaims, and its creator's cancel).
func checkGrowth(t *task, r *record) *log.ProblemsError {
	switch r.kind {
	case KindAccept, KindHandoff, KindRelease:
		if n := len(t.History); n >= MaxEntries {
			return Refuse(RuleLimit, "task %s already holds %d entries, the limit; it takes no more accepts, handoffs or releases. Its owner may still report completion and its creator cancel it; create a new task for the work", t.ID, n)
		}
	}
	return nil
}

// visible reports whether s has a character that shows and is not
// space: a letter, mark, number, punctuation or symbol that is not
// invisible as actor ids count it (log.Invisible, so that a title of
// Hangul fillers or variation selectors alone is as blank as one of
// zero-width spaces).
func visible(s string) bool {
	for _, c := range s {
		if log.Invisible(c) == "" && !unicode.IsSpace(c) {
			return true
		}
	}
	return false
}

// checkActor checks an actor id: the caller's (who) or one named in an
// argument.
func checkActor(name, s string) *log.ProblemsError {
	if s == "" {
		return Refuse(RuleInvalidArgument, "%s is empty; name an actor id", name)
	}
	if !utf8.ValidString(s) || len(s) > MaxActor {
		return Refuse(RuleInvalidArgument, "%s must be valid UTF-8 of at most %d bytes", name, MaxActor)
	}
	return nil
}

// checkTaskID checks the form of a task id: "t_" and 32 lowercase hex.
func checkTaskID(id string) *log.ProblemsError {
	if len(id) == 34 && strings.HasPrefix(id, "t_") {
		if _, err := hex.DecodeString(id[2:]); err == nil && strings.ToLower(id) == id {
			return nil
		}
	}
	if id == "" {
		return Refuse(RuleInvalidArgument, "task_id is required; get one from create_task or list_unaccepted_tasks")
	}
	if len(id) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(id[cut]) {
			cut-- // at a character's start: half of one shows as bytes
		}
		id = id[:cut] + "…"
	}
	return Refuse(RuleUnknownTask, "%q is not a task id (task ids look like t_ followed by 32 hex digits); get one from create_task or list_unaccepted_tasks", id)
}

// checkShape checks what can be checked of r without the task: the actor,
// the task id's form and every argument's size and form.
func checkShape(r *record) *log.ProblemsError {
	if r.actor == "" {
		return Refuse(RuleIdentity, "no authenticated actor; task operations need a caller identity (bearer token over HTTP, the configured actor over stdio)")
	}
	if !utf8.ValidString(r.actor) || len(r.actor) > MaxActor {
		return Refuse(RuleIdentity, "the authenticated actor id is not valid UTF-8 of at most %d bytes; fix the actor configuration", MaxActor)
	}
	if err := checkTaskID(r.taskID); err != nil {
		return err
	}
	switch r.kind {
	case KindCreate:
		if err := checkText("title", r.title, MaxTitle, true); err != nil {
			return err
		}
		if err := checkText("description", r.description, MaxText, false); err != nil {
			return err
		}
		if r.offerTo != "" {
			if err := checkActor("offer_to", r.offerTo); err != nil {
				return err
			}
		}
	case KindClaim:
		if r.provenance.rank() == 0 {
			return Refuse(RuleProvenance, "provenance must be exactly one of %q (you saw it in your own calls; cite them as evidence), %q (you checked someone else's work) or %q (someone told you; name them in source); got %q",
				Observed, Reviewed, Reported, trim(string(r.provenance)))
		}
		if err := checkText("summary", r.summary, MaxText, true); err != nil {
			return err
		}
		if err := checkText("source", r.source, MaxSource, false); err != nil {
			return err
		}
		if r.provenance == Reported && strings.TrimSpace(r.source) == "" {
			return Refuse(RuleSource, "a reported claim must name its source (who told you) in source; or, if you saw or checked it yourself, use provenance observed or reviewed")
		}
		if len(r.evidence) > MaxEvidence {
			return Refuse(RuleInvalidArgument, "evidence lists %d entries, over the limit of %d; cite the entries that matter", len(r.evidence), MaxEvidence)
		}
		seen := make(map[uint64]bool, len(r.evidence))
		for _, i := range r.evidence {
			if seen[i] {
				return Refuse(RuleEvidence, "evidence cites entry %d twice; list each index once", i)
			}
			seen[i] = true
		}
	case KindHandoff:
		if r.to == "" {
			return Refuse(RuleHandoffTarget, "to is empty; name the actor to hand the task to")
		}
		if err := checkActor("to", r.to); err != nil {
			return err
		}
		if r.to == r.actor {
			return Refuse(RuleHandoffTarget, "you cannot hand a task off to yourself; name another actor, or keep working on it")
		}
		if err := checkText("note", r.note, MaxText, false); err != nil {
			return err
		}
	case KindRelease, KindCancel:
		if err := checkText("note", r.note, MaxText, false); err != nil {
			return err
		}
	}
	return nil
}

func trim(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut-- // at a character's start: half of one shows as bytes
		}
		return s[:cut] + "…"
	}
	return s
}

// reader reads single entries for evidence checks. calls are the calls
// without a result among the entries before the one judged (calls.go):
// the rules read them for an observed claim, which needs them.
type reader struct {
	ctx   context.Context
	r     EntryReader
	calls *callSet
}

// errMissing marks a cited index the log does not hold.
var errMissing = errors.New("missing")

func (rd reader) entry(i uint64) ([]byte, error) {
	es, err := rd.r.Entries(rd.ctx, i, i+1)
	if errors.Is(err, log.ErrNotFound) {
		return nil, errMissing
	}
	if err != nil {
		return nil, fmt.Errorf("reading entry %d: %w", i, err)
	}
	if len(es) != 1 {
		return nil, fmt.Errorf("reading entry %d: got %d entries", i, len(es))
	}
	return es[0], nil
}

// check applies the rules to r against t (nil when r creates a task).
// limit is the index r will get when known (rebuild), or 0 when r is not
// yet written: cited entries must lie below it. A refusal is made by [Refuse];
// any other error is a failure to read the log.
func check(rd reader, t *task, r *record, limit uint64) error {
	if err := checkShape(r); err != nil {
		return err
	}
	if r.kind == KindCreate {
		if t != nil {
			return Refuse(RuleEntry, "task %s already exists", r.taskID)
		}
		return nil
	}
	if t == nil {
		return Refuse(RuleUnknownTask, "no task %s; get task ids from create_task or list_unaccepted_tasks", r.taskID)
	}
	id, owner := t.ID, t.Owner
	switch t.State {
	case StateCancelled:
		return Refuse(RuleFinished, "task %s was cancelled; nothing more can happen to it. Create a new task if the work is still needed", id)
	case StateCompleted:
		if r.kind != KindClaim {
			return Refuse(RuleFinished, "task %s is completed (owner %s); it cannot be accepted, handed off, released or cancelled. Create a new task for further work", id, owner)
		}
	}
	switch r.kind {
	case KindAccept:
		switch {
		case owner == r.actor:
			return Refuse(RuleAlreadyOwner, "you already own task %s; nothing to do", id)
		case owner != "":
			return Refuse(RuleOwned, "task %s is owned by %s; a task has one owner. Ask %s to hand it off to you (handoff_task) or to release it", id, owner, owner)
		case t.Reservation != "" && t.Reservation != r.actor:
			return Refuse(RuleReserved, "task %s is reserved for %s; only %s may accept it. Pick another task from list_unaccepted_tasks", id, t.Reservation, t.Reservation)
		}
	case KindClaim, KindHandoff, KindRelease:
		if owner != r.actor {
			who := "nobody owns it; accept it first with accept_task"
			if owner != "" {
				who = "it is owned by " + owner
			}
			return Refuse(RuleNotOwner, "only the owner of task %s may %s, and %s", id, verb(r.kind), who)
		}
	case KindCancel:
		if t.Creator != r.actor {
			return Refuse(RuleNotCreator, "only the creator of task %s (%s) may cancel it; if you own it and want to stop, use release_task", id, t.Creator)
		}
	}
	if r.prev != nil && *r.prev != t.head() {
		h := t.head()
		return Refuse(RulePrev, "prev names entry %d (leaf hash %s) as task %s's previous entry, but that is entry %d (leaf hash %s)", r.prev.Index, r.prev.LeafHash, id, h.Index, h.LeafHash)
	}
	switch r.kind {
	case KindClaim:
		return checkClaim(rd, t, r, limit)
	case KindHandoff:
		if r.snapshot == nil {
			return Refuse(RuleSnapshot, "handoff entry carries no snapshot")
		}
		if want := t.snapshot(); !equalSnapshot(r.snapshot, want) {
			return Refuse(RuleSnapshot, "handoff snapshot does not match the task's state before it")
		}
	}
	return nil
}

func verb(kind string) string {
	switch kind {
	case KindClaim:
		return "report completion"
	case KindHandoff:
		return "hand it off"
	}
	return "release it"
}

func checkClaim(rd reader, t *task, r *record, limit uint64) error {
	if len(t.claims) >= MaxClaims {
		return Refuse(RuleLimit, "task %s already holds %d claims, the limit; create a follow-up task", t.ID, MaxClaims)
	}
	r.calls, r.failed = r.calls[:0], r.failed[:0]
	for _, i := range r.evidence {
		if limit != 0 && i >= limit {
			return Refuse(RuleEvidence, "evidence cites entry %d, which did not exist when the claim was made", i)
		}
		b, err := rd.entry(i)
		if errors.Is(err, errMissing) {
			return Refuse(RuleEvidence, "evidence cites entry %d, which does not exist in the log; cite indices of existing entries (from receipts)", i)
		}
		if err != nil {
			return err
		}
		if r.provenance != Observed {
			continue
		}
		if err := checkObserved(rd, t, r, i, b); err != nil {
			return err
		}
	}
	prev, ok := t.last[r.actor]
	if ok && prev.rank() < r.provenance.rank() {
		fresh, err := freshEvidence(rd, t, r.actor, r.evidence)
		if err != nil {
			return err
		}
		if !fresh {
			return Refuse(RuleUpgrade, "your previous claim on task %s was %s; a more certain claim (%s) must cite evidence you have not cited on this task before (a call and its call.result count as one; the task's own entries and your own task entries, such as your earlier claims, are not evidence). Add new evidence, or keep provenance %s", t.ID, prev, r.provenance, prev)
		}
	}
	return nil
}

// freshEvidence reports whether evidence, cited by actor on t, cites
// something new: not in the indices the actor cited on t before, and not
// a record of the claims themselves. A call.result stands for its call,
// as it does for an observed claim: citing a call's result after the call
// (or the call after its result) is not new evidence. The entries of t
// and actor's own task entries (its earlier claims, here or elsewhere)
// are not evidence either: citing them would let a claim grow more
// certain on nothing but what was said before. It reads the cited
// entries, which only a claim more certain than the actor's last one
// needs: at most MaxClaims × MaxEvidence of them.
func freshEvidence(rd reader, t *task, actor string, evidence []uint64) (bool, error) {
	cited := t.cited[actor]
	var before map[uint64]bool
	for _, i := range evidence {
		if cited[i] {
			continue
		}
		c, record, err := citedCall(rd, i, t.ID, actor)
		if err != nil {
			return false, err
		}
		if record {
			continue
		}
		if before == nil {
			if before, err = t.citedCalls(rd, cited); err != nil {
				return false, err
			}
		}
		if !before[c] {
			return true, nil
		}
	}
	return false, nil
}

// citedCalls returns the calls the entries of cited stand for, reading
// only those t has not mapped before.
func (t *task) citedCalls(rd reader, cited map[uint64]bool) (map[uint64]bool, error) {
	t.memo.Lock()
	defer t.memo.Unlock()
	if t.calls == nil {
		t.calls = make(map[uint64]uint64, len(cited))
	}
	out := make(map[uint64]bool, len(cited))
	for j := range cited {
		c, ok := t.calls[j]
		if !ok {
			var err error
			if c, _, err = citedCall(rd, j, "", ""); err != nil {
				return nil, err
			}
			t.calls[j] = c
		}
		out[c] = true
	}
	return out, nil
}

// citedCall returns the index of the call that entry i, a cited one,
// stands for (callOf): its call if it is a call.result naming an earlier
// entry, else i itself. record reports whether i is a task entry of task
// id or one actor made: a record of claims, not evidence.
func citedCall(rd reader, i uint64, id, actor string) (call uint64, record bool, err error) {
	b, err := rd.entry(i)
	if errors.Is(err, errMissing) {
		return i, false, nil // checked to exist when cited; a log that lost it fails its audit
	}
	if err != nil {
		return 0, false, err
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		return i, false, nil
	}
	if log.IsTaskKind(e.Kind) {
		if e.Actor == actor {
			return i, true, nil
		}
		if te, err := log.ParseTask(e); err == nil && te.TaskID == id {
			return i, true, nil
		}
	}
	call, _ = callOf(i, e) // a result that names no earlier call stands for itself
	return call, false, nil
}

// callOf returns the index of the call that e, entry i, stands for when
// cited as evidence: the call a call.result names, or i itself for an
// entry of another kind. ok is false for a call.result that does not
// name an earlier entry (or does not parse): it stands for no call, and
// call is i. Both rules that look through a cited result to its call,
// the observed claim's (checkObserved) and the upgrade's (freshEvidence,
// through citedCall), map it by this one function, so that they see the
// same call for the same result.
func callOf(i uint64, e *log.Entry) (call uint64, ok bool) {
	if e.Kind != log.KindCallResult {
		return i, true
	}
	res, err := log.ParseCallResult(e)
	if err != nil || res.Call >= i {
		return i, false
	}
	return res.Call, true
}

// checkObserved checks entry i (bytes b), cited by r, an observed claim:
// it must be one of the claimant's own calls made while it owned the task,
// whose call.result lies before the claim (a failed call's too: a failure
// is an outcome the agent saw).
// A call is made when its call entry is written, before it is forwarded,
// so that entry's index is what must lie in a tenure: a call started
// before the accept does not count, however late it finished. A
// call.result stands for its call (callOf). (A call entry of an old log,
// written after the call with its outcome, has only its own index to go
// by, and holds its outcome.)
func checkObserved(rd reader, t *task, r *record, i uint64, b []byte) error {
	if rd.calls == nil {
		return errors.New("checking an observed claim: the calls without a result are not known")
	}
	if read := rd.calls.read(); i >= read {
		// Appended after the engine read the log's calls (another
		// writer's, a moment ago): whether its call has a result before
		// this claim cannot be told, and the claim, written after it,
		// may come before that result. (Rebuilding reads every entry
		// before a claim, which cites only those.)
		return Refuse(RuleEvidence, "evidence entry %d was not yet in the log when the sidecar read its calls for this claim (it had read %d entries), so whether its call has a result before the claim cannot be told; cite it again", i, read)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		return Refuse(RuleEvidence, "evidence entry %d does not parse; an observed claim may cite only your own call entries", i)
	}
	call, ok := callOf(i, e)
	if !ok {
		return Refuse(RuleEvidence, "evidence entry %d is a call.result that does not name an earlier call", i)
	}
	if call != i {
		cb, err := rd.entry(call)
		if err != nil {
			return Refuse(RuleEvidence, "evidence entry %d is the result of entry %d, which cannot be read: %v", i, call, err)
		}
		if e, err = log.ParseEntry(cb); err != nil {
			return Refuse(RuleEvidence, "evidence entry %d is the result of entry %d, which does not parse", i, call)
		}
	}
	if e.Kind != log.KindCall {
		return Refuse(RuleEvidence, "evidence entry %d is a %s entry, not a call; an observed claim may cite only your own call entries made while you owned the task (use provenance reviewed to cite other entries)", i, e.Kind)
	}
	if e.Actor != r.actor {
		return Refuse(RuleEvidence, "evidence entry %d is a call by %q, not by you; an observed claim may cite only your own calls (use provenance reviewed for someone else's work)", i, e.Actor)
	}
	if !t.ownedAt(r.actor, call) {
		return Refuse(RuleEvidence, "evidence entry %d is a call you made (entry %d) while you did not own task %s (you owned it over entries %s); an observed claim may cite only calls made while you owned the task", i, call, t.ID, t.tenuresOf(r.actor))
	}
	c, err := log.ParseCall(e)
	if err != nil {
		return Refuse(RuleEvidence, "evidence entry %d is the call entry %d, which does not parse (%v); an observed claim may cite only calls whose outcome the log holds", i, call, err)
	}
	if rd.calls.open(call) {
		return Refuse(RuleEvidence, "evidence entry %d is your call %d, which has no call.result in the log before this claim (it is still running, or was cut off): you cannot have observed its outcome. Wait for the call to finish and cite it or its call.result (the index in its receipt), cite a call that has finished, or claim provenance reviewed or reported", i, call)
	}
	failed := rd.calls.failed(call)
	if c.Outcome != nil { // an old log's call, holding its outcome
		failed = c.Outcome.IsError || c.Outcome.Error != ""
	}
	r.calls, r.failed = append(r.calls, call), append(r.failed, failed)
	return nil
}

// ownedAt reports whether actor owned t at index i: after one of its
// accepts and before the entry that ended that ownership.
func (t *task) ownedAt(actor string, i uint64) bool {
	for _, te := range t.tenures {
		if te.actor == actor && i > te.from && (te.open || i < te.to) {
			return true
		}
	}
	return false
}

func (t *task) tenuresOf(actor string) string {
	var parts []string
	for _, te := range t.tenures {
		if te.actor != actor {
			continue
		}
		if te.open {
			parts = append(parts, fmt.Sprintf("after %d", te.from))
		} else {
			parts = append(parts, fmt.Sprintf("(%d, %d)", te.from, te.to))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// head names t's latest entry: what the next entry's prev names.
func (t *task) head() EntryRef {
	h := t.History[len(t.History)-1]
	return EntryRef{Index: h.Index, LeafHash: h.LeafHash}
}

// snapshot is the frozen state a handoff of t carries.
func (t *task) snapshot() *Snapshot {
	return &Snapshot{
		State:       string(t.State),
		Owner:       t.Owner,
		Reservation: t.Reservation,
		HistoryHead: t.head(),
		Claims:      append([]ClaimRef{}, t.claims...),
	}
}

func equalSnapshot(a, b *Snapshot) bool {
	if a.State != b.State || a.Owner != b.Owner || a.Reservation != b.Reservation || a.HistoryHead != b.HistoryHead || len(a.Claims) != len(b.Claims) {
		return false
	}
	for i := range a.Claims {
		if a.Claims[i] != b.Claims[i] {
			return false
		}
	}
	return true
}

// newTask returns the task r (a create) makes.
func newTask(r *record, index uint64) *task {
	t := &task{
		Task: Task{Summary: Summary{
			ID: r.taskID, Title: r.title, Creator: r.actor, Created: r.time, CreatedIndex: index,
			State: StatePending, Reservation: r.offerTo, Since: r.time,
		}, Description: r.description},
		last:  map[string]Provenance{},
		cited: map[string]map[uint64]bool{},
	}
	return t
}

// apply changes t by r, written at index with leaf hash leaf. r has passed
// check.
func (t *task) apply(r *record, index uint64, leaf []byte) {
	ev := Event{Index: index, LeafHash: hex.EncodeToString(leaf), Kind: r.kind, Actor: r.actor, Auth: r.auth, Time: r.time,
		Note: r.note}
	t.bytes += int64(r.size)
	endTenure := func() {
		for k := range t.tenures {
			if t.tenures[k].open {
				t.tenures[k].open, t.tenures[k].to = false, index
			}
		}
	}
	switch r.kind {
	case KindCreate:
		ev.Title, ev.Description, ev.OfferTo = r.title, r.description, r.offerTo
	case KindAccept:
		t.Owner, t.Reservation, t.State, t.Since = r.actor, "", StateAccepted, r.time
		t.tenures = append(t.tenures, tenure{actor: r.actor, from: index, open: true})
	case KindClaim:
		ev.Provenance, ev.Summary, ev.Evidence, ev.Source = r.provenance, r.summary, r.evidence, r.source
		t.claims = append(t.claims, ClaimRef{Index: index, LeafHash: ev.LeafHash, Actor: r.actor, Provenance: string(r.provenance)})
		t.last[r.actor] = r.provenance
		c := t.cited[r.actor]
		if c == nil {
			c = map[uint64]bool{}
			t.cited[r.actor] = c
		}
		for _, i := range r.evidence {
			c[i] = true
		}
		if t.State == StateAccepted {
			t.State, t.Since = StateCompleted, r.time
		}
	case KindHandoff:
		ev.To, ev.Snapshot = r.to, r.snapshot
		endTenure()
		t.Owner, t.Reservation, t.State, t.Since = "", r.to, StatePending, r.time
	case KindRelease:
		endTenure()
		t.Owner, t.Reservation, t.State, t.Since = "", "", StatePending, r.time
	case KindCancel:
		endTenure()
		t.Owner, t.Reservation, t.State, t.Since = "", "", StateCancelled, r.time
	}
	t.History = append(t.History, ev)
}

// view returns a copy of t's public state that later changes to t do not
// touch. Events are never changed once appended, so they are shared.
func (t *task) view() Task {
	v := t.Task
	v.History = t.History[:len(t.History):len(t.History)]
	return v
}
