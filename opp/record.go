package opp

import (
	"bytes"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
)

// record is one task operation, as the engine is about to write it or as
// it was read back from the log. The same rules check both.
type record struct {
	kind   string
	actor  string
	auth   *log.Auth // how actor was authenticated, if by an identity provider
	time   time.Time
	taskID string

	title, description, offerTo string // create

	provenance Provenance // claim
	summary    string
	evidence   []uint64
	source     string

	to       string // handoff
	note     string // handoff, release, cancel
	snapshot *Snapshot

	// prev is the task's previous entry, which the engine writes on every
	// entry but a create and a rebuild checks (rules.go); nil in entries
	// written before it was added.
	prev *EntryRef

	// calls are, for an observed claim that passed check, the calls its
	// evidence stands for, one per cited index, in order (onetask.go),
	// and failed says which of them failed (succeeded.go).
	calls  []uint64
	failed []bool

	// size is the entry's length in bytes, once written or read.
	size int

	// after is, on a shared log, the size the engine had read when it
	// checked the rules; the append is fenced on it (shared.go).
	after uint64
}

// marshal returns the entry bytes of r. Empty optional fields are left out.
func (r *record) marshal() ([]byte, error) {
	t := &log.TaskEntry{Kind: r.kind, Time: r.time, Actor: r.actor, Auth: r.auth, TaskID: r.taskID,
		Title: r.title, Description: r.description, OfferTo: r.offerTo,
		Provenance: string(r.provenance), Summary: r.summary, Evidence: r.evidence, Source: r.source,
		To: r.to, Note: r.note, Snapshot: r.snapshot, Prev: r.prev}
	return t.Marshal()
}

// isTaskEntry reports cheaply whether b may be a task entry: a canonical
// entry of a task kind holds `"kind":"task.` with these very quotes (inside
// a string value they would be escaped). A match may still be a nested
// key, so the caller parses to be sure.
func isTaskEntry(b []byte) bool { return bytes.Contains(b, []byte(`"kind":"task.`)) }

// parseRecord parses a task entry. It returns (nil, nil) for entries of
// other kinds, and a refusal ([Refuse]) for a task entry that is malformed.
func parseRecord(b []byte) (*record, error) {
	e, err := log.ParseEntry(b)
	if err != nil {
		return nil, err
	}
	if !log.IsTaskKind(e.Kind) {
		if strings.HasPrefix(e.Kind, "task.") {
			return nil, Refuse(RuleEntry, "unknown task entry kind %q", e.Kind)
		}
		return nil, nil
	}
	t, err := log.ParseTask(e)
	if err != nil {
		return nil, Refuse(RuleEntry, "%v", err)
	}
	if t.Kind == KindHandoff && t.Snapshot == nil {
		return nil, Refuse(RuleSnapshot, "handoff entry carries no snapshot")
	}
	return &record{kind: t.Kind, actor: t.Actor, auth: t.Auth, time: t.Time, taskID: t.TaskID, size: len(b),
		title: t.Title, description: t.Description, offerTo: t.OfferTo,
		provenance: Provenance(t.Provenance), summary: t.Summary, evidence: t.Evidence, source: t.Source,
		to: t.To, note: t.Note, snapshot: t.Snapshot, prev: t.Prev}, nil
}
