package opp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/provlog/provlog/log"
)

// Entry kinds written by the engine.
const (
	KindCreate  = log.KindTaskCreate
	KindAccept  = log.KindTaskAccept
	KindClaim   = log.KindTaskClaim
	KindHandoff = log.KindTaskHandoff
	KindRelease = log.KindTaskRelease
	KindCancel  = log.KindTaskCancel
)

// Limits on what callers send. Lengths count characters (Unicode code
// points), not bytes. They keep every entry, handoff snapshot included,
// well under log.MaxEntrySize.
const (
	MaxTitle    = 200  // task title
	MaxText     = 4000 // description, summary, note
	MaxSource   = 500  // a claim's source
	MaxActor    = 128  // an actor id (callers and offer_to / to)
	MaxEvidence = 64   // evidence indices in one claim
	MaxClaims   = 100  // claims on one task, by all actors
	// MaxEntries bounds the entries one task takes before accept,
	// handoff and release are refused (its owner may still complete it,
	// its creator cancel it), so that rebuilding a task, which an
	// operation on one not in the cache does, reads a bounded number of
	// entries. Entries already in a log are never judged by it.
	MaxEntries = 1000
)

// TaskState is where a task is in its life.
type TaskState string

// Task states.
const (
	StatePending   TaskState = "pending_acceptance"
	StateAccepted  TaskState = "accepted"
	StateCompleted TaskState = "completed"
	StateCancelled TaskState = "cancelled"
)

// Provenance says how a claimant knows its claim is true.
type Provenance string

// The provenances, from least to most certain.
const (
	Reported Provenance = "reported" // someone said so; the claim names them as source
	Reviewed Provenance = "reviewed" // the claimant checked someone else's work
	Observed Provenance = "observed" // the claimant saw it in its own calls
)

// rank orders provenances by certainty; 0 means not a provenance.
func (p Provenance) rank() int {
	switch p {
	case Reported:
		return 1
	case Reviewed:
		return 2
	case Observed:
		return 3
	}
	return 0
}

// Log is what the engine needs of provlog's log: append an entry durably
// and get its receipt, and read entries back (to rebuild state, and to
// check the entries a claim cites), and its size, to read the calls
// appended since it last looked before it judges an observed claim.
type Log interface {
	// Append returns once entry is durable in the log.
	Append(ctx context.Context, entry []byte) (*log.Receipt, error)
	// LatestSize returns the size of the log as last committed (by any
	// writer, if it has others).
	LatestSize(ctx context.Context) (uint64, error)
	EntryReader
}

// EntryReader reads log entries; a log.Storage is one. Entries returns
// the entries at [start, end), and an error wrapping log.ErrNotFound if
// end is past the log's size.
type EntryReader interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}

// A SparseReader is an EntryReader that holds few of the entries below
// its size (an evidence's), every other one reading as {}, which no rule
// looks at. Held returns the first index at or after i that it holds, or
// false if there is none: [Rebuild] reads only those, so that its work
// follows the entries held, not the indices they are at.
type SparseReader interface {
	EntryReader
	Held(i uint64) (uint64, bool)
}

// Rule names, as a refusal's or a [Violation]'s Rule reports them.
const (
	RuleIdentity        = "identity"          // no or invalid authenticated actor
	RuleInvalidArgument = "invalid_argument"  // missing, malformed or oversized argument
	RuleUnknownTask     = "unknown_task"      // no such task
	RuleFinished        = "task_finished"     // task completed or cancelled
	RuleAlreadyOwner    = "already_owner"     // accept by the current owner
	RuleOwned           = "owned_by_another"  // accept of an owned task
	RuleReserved        = "reserved"          // accept of a task reserved for someone else
	RuleNotOwner        = "not_owner"         // claim, handoff or release by a non-owner
	RuleNotCreator      = "not_creator"       // cancel by someone other than the creator
	RuleProvenance      = "provenance"        // not exactly one of observed, reviewed, reported
	RuleSource          = "source_required"   // reported claim without a source
	RuleEvidence        = "evidence"          // cited entry missing, or not allowed for observed
	RuleUpgrade         = "certainty_upgrade" // more certain claim without new evidence
	RuleHandoffTarget   = "handoff_target"    // handoff to nobody or to oneself
	RuleLimit           = "limit"             // too many claims, or entries, on one task
	RuleSnapshot        = "handoff_snapshot"  // (rebuild only) handoff snapshot missing or wrong
	RulePrev            = "task_prev"         // (rebuild only) prev does not name the task's previous entry
	RuleEntry           = "malformed_entry"   // (rebuild only) task entry that does not parse
)

// refusedWhat and refusedPart are what a refusal's problem names.
const (
	refusedWhat = "task request"
	refusedPart = "request"
)

// Refuse returns the error of a refused task request: a
// *log.ProblemsError whose one problem's Rule names the rule that refused
// (one of the Rule constants) and whose Msg says what was wrong and what to
// do. Nothing was written to the log. [Refusal] reads it back.
func Refuse(rule, format string, args ...any) *log.ProblemsError {
	return &log.ProblemsError{What: refusedWhat, Problems: []log.Problem{{Part: refusedPart, Rule: rule, Msg: fmt.Sprintf(format, args...)}}}
}

// Refusal returns the problem of a refused task request, if err is (or
// wraps) one made by [Refuse]; its Rule names the rule.
func Refusal(err error) (log.Problem, bool) {
	var pe *log.ProblemsError
	if !errors.As(err, &pe) || pe.What != refusedWhat || len(pe.Problems) != 1 || pe.Problems[0].Rule == "" {
		return log.Problem{}, false
	}
	return pe.Problems[0], true
}

// CreateArgs are the arguments of create_task.
type CreateArgs struct {
	Title       string
	Description string
	// OfferTo reserves the task for one actor, who alone may accept it. It
	// does not make that actor the owner.
	OfferTo string
}

// ClaimArgs are the arguments of report_completion.
type ClaimArgs struct {
	TaskID     string
	Provenance string // exactly "observed", "reviewed" or "reported"
	Summary    string
	Evidence   []uint64 // log indices
	Source     string   // who said so; required for "reported"
}

// HandoffArgs are the arguments of handoff_task.
type HandoffArgs struct {
	TaskID string
	To     string
	Note   string
}

// Result is what a successful operation wrote: the entry's index, leaf hash
// and receipt, and the task as it is after the entry.
type Result struct {
	Task     Summary
	Index    uint64
	LeafHash []byte
	Receipt  *log.Receipt
}

// Summary is a task without its history.
type Summary struct {
	ID           string    `json:"task_id"`
	Title        string    `json:"title"`
	Creator      string    `json:"creator"`
	Created      time.Time `json:"created"`
	CreatedIndex uint64    `json:"created_index"`
	State        TaskState `json:"state"`
	Owner        string    `json:"owner"`       // "" when nobody owns it
	Reservation  string    `json:"reservation"` // "" when anyone may accept it
	Since        time.Time `json:"since"`       // time of the last entry that changed state, owner or reservation
}

// Task is a task with its full history.
type Task struct {
	Summary
	Description string  `json:"description,omitempty"`
	History     []Event `json:"history"`
}

// Event is one entry in a task's history, with what is needed to prove it
// (index and leaf hash) and the entry's own fields.
type Event struct {
	Index    uint64    `json:"index"`
	LeafHash string    `json:"leaf_hash"` // hex
	Kind     string    `json:"kind"`
	Actor    string    `json:"actor"`
	Time     time.Time `json:"time"`
	// Auth is the entry's auth member: the OAuth token's issuer, subject,
	// client and act chain (never the token), for an actor an identity
	// provider vouched for.
	Auth *log.Auth `json:"auth,omitempty"`

	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	OfferTo     string `json:"offer_to,omitempty"`

	Provenance Provenance `json:"provenance,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Evidence   []uint64   `json:"evidence,omitempty"`
	Source     string     `json:"source,omitempty"`

	To       string    `json:"to,omitempty"`
	Note     string    `json:"note,omitempty"`
	Snapshot *Snapshot `json:"snapshot,omitempty"`
}

// Snapshot is the frozen state of a task that a handoff entry carries
// (its form is the log's: see [log.TaskSnapshot]).
type Snapshot = log.TaskSnapshot

// EntryRef names one log entry.
type EntryRef = log.TaskEntryRef

// ClaimRef names one claim entry and says who made it with what provenance.
type ClaimRef = log.TaskClaimRef

// Violation is a task entry in the log that breaks a rule (or does not
// parse). It had no effect on the state.
type Violation struct {
	Index uint64 `json:"index"`
	Kind  string `json:"kind"`
	Rule  string `json:"rule"`
	Msg   string `json:"msg"`
}

func (v Violation) String() string { return v.Problem().String() }

// Problem is the violation in the shape every verifier reports: the part
// is the entry, "entry N (KIND)".
func (v Violation) Problem() log.Problem {
	return log.Problem{Part: fmt.Sprintf("entry %d (%s)", v.Index, v.Kind), Rule: v.Rule, Msg: fmt.Sprintf("breaks rule %s: %s", v.Rule, v.Msg)}
}
