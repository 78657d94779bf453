package log

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Task entry kinds (DESIGN §7), written by the task engine (opp), which
// owns their rules; their form is here so that every reader of a log (an
// export, a PROV document, a verifier) reads them by type.
const (
	KindTaskCreate  = "task.create"
	KindTaskAccept  = "task.accept"
	KindTaskClaim   = "task.claim"
	KindTaskHandoff = "task.handoff"
	KindTaskRelease = "task.release"
	KindTaskCancel  = "task.cancel"
)

// A TaskEntry is one task entry, of any of the six task kinds: they share
// task_id, and each kind carries a few of the other fields:
//
//   - task.create: Title, Description?, OfferTo?
//   - task.accept: nothing more
//   - task.claim: Provenance, Summary, Evidence? (log indices), Source?
//   - task.handoff: To, Note?, Snapshot
//   - task.release, task.cancel: Note?
//
// Every kind but task.create may carry Prev?, the task's previous entry:
// provlog writes it on every such entry since it was added, so that a
// task's history is a chain from any entry back to its creation; entries
// written before have none.
//
// Marked fields are left out of the entry when empty. Whether an entry
// obeys the rules of ownership (who may do what, when) is the task
// engine's to judge, not this type's.
type TaskEntry struct {
	Kind   string // one of the KindTask constants
	Time   time.Time
	Actor  string
	Auth   *Auth // how Actor was authenticated, if by an identity provider
	TaskID string

	Title, Description, OfferTo string // create

	Provenance string // claim: "observed", "reviewed" or "reported"
	Summary    string
	Evidence   []uint64
	Source     string

	To       string // handoff
	Note     string // handoff, release, cancel
	Snapshot *TaskSnapshot

	Prev *TaskEntryRef // all but create: the same task's previous entry
}

// A TaskSnapshot is the frozen state of a task that a handoff carries:
// what the recipient is handed, pinned by the index and leaf hash of the
// last event before the handoff and of every claim so far.
type TaskSnapshot struct {
	State       string         `json:"state"`
	Owner       string         `json:"owner"`
	Reservation string         `json:"reservation"`
	HistoryHead TaskEntryRef   `json:"history_head"`
	Claims      []TaskClaimRef `json:"claims"`
}

// A TaskEntryRef names one log entry.
type TaskEntryRef struct {
	Index    uint64 `json:"index"`
	LeafHash string `json:"leaf_hash"` // lowercase hex of the RFC 6962 leaf hash
}

// A TaskClaimRef names one claim entry and says who made it with what
// provenance.
type TaskClaimRef struct {
	Index      uint64 `json:"index"`
	LeafHash   string `json:"leaf_hash"` // hex
	Actor      string `json:"actor"`
	Provenance string `json:"provenance"`
}

// IsTaskKind reports whether kind is one of the six task kinds.
func IsTaskKind(kind string) bool { return taskFields[kind] != nil }

// taskFields lists the members each task kind may hold besides the common
// ones, and whether each is required.
var taskFields = map[string]map[string]bool{
	KindTaskCreate:  {"task_id": true, "title": true, "description": false, "offer_to": false},
	KindTaskAccept:  {"task_id": true, "prev": false},
	KindTaskClaim:   {"task_id": true, "provenance": true, "summary": true, "evidence": false, "source": false, "prev": false},
	KindTaskHandoff: {"task_id": true, "to": true, "note": false, "snapshot": false, "prev": false},
	KindTaskRelease: {"task_id": true, "note": false, "prev": false},
	KindTaskCancel:  {"task_id": true, "note": false, "prev": false},
}

// taskWire is the JSON form of every task kind's own members.
type taskWire struct {
	TaskID      string        `json:"task_id"`
	Title       string        `json:"title,omitempty"`
	Description string        `json:"description,omitempty"`
	OfferTo     string        `json:"offer_to,omitempty"`
	Provenance  string        `json:"provenance,omitempty"`
	Summary     string        `json:"summary,omitempty"`
	Evidence    []uint64      `json:"evidence,omitempty"`
	Source      string        `json:"source,omitempty"`
	To          string        `json:"to,omitempty"`
	Note        string        `json:"note,omitempty"`
	Snapshot    *TaskSnapshot `json:"snapshot,omitempty"`
	Prev        *TaskEntryRef `json:"prev,omitempty"`
}

// Marshal returns the task entry's bytes. It fails as [Entry.Marshal]
// does, for an unknown kind, and for a field the kind does not carry.
func (t *TaskEntry) Marshal() ([]byte, error) {
	allowed := taskFields[t.Kind]
	if allowed == nil {
		return nil, fmt.Errorf("task entry: unknown kind %q", t.Kind)
	}
	w := taskWire{TaskID: t.TaskID, Title: t.Title, Description: t.Description, OfferTo: t.OfferTo, Provenance: t.Provenance,
		Summary: t.Summary, Evidence: t.Evidence, Source: t.Source, To: t.To, Note: t.Note, Snapshot: t.Snapshot, Prev: t.Prev}
	e, err := NewEntry(t.Kind, t.Time, t.Actor, w)
	if err != nil {
		return nil, err
	}
	e.Auth = t.Auth
	for k := range e.Fields {
		if _, ok := allowed[k]; !ok {
			return nil, fmt.Errorf("task entry: a %s entry has no %q", t.Kind, k)
		}
	}
	for k, required := range allowed {
		if _, ok := e.Fields[k]; required && !ok {
			e.Fields[k] = "" // a required member is written even when empty
		}
	}
	if t.Kind == KindTaskHandoff && t.Snapshot == nil {
		return nil, fmt.Errorf("task entry: a %s entry needs a snapshot", t.Kind)
	}
	return e.Marshal()
}

// ParseTask reads a task entry of any task kind. It refuses members the
// kind does not carry, a missing required member (a handoff without its
// snapshot is left to the task engine, which names that rule), members of
// the wrong type, and an empty evidence list (empty evidence is written by
// leaving it out).
func ParseTask(e *Entry) (*TaskEntry, error) {
	allowed := taskFields[e.Kind]
	if allowed == nil {
		return nil, fmt.Errorf("entry is a %s entry, not a task entry", e.Kind)
	}
	for k, v := range e.Fields {
		if _, ok := allowed[k]; !ok {
			return nil, fmt.Errorf("%s entry has unexpected field %q", e.Kind, k)
		}
		if v == nil {
			return nil, fmt.Errorf("%s entry: %q is null", e.Kind, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(allowed)) {
		if _, ok := e.Fields[k]; allowed[k] && !ok {
			return nil, fmt.Errorf("%s entry has no %q", e.Kind, k)
		}
	}
	rd := fieldReader{f: e.Fields}
	t := &TaskEntry{Kind: e.Kind, Time: e.Time, Actor: e.Actor, Auth: e.Auth, TaskID: rd.str("task_id"),
		Title: rd.str("title"), Description: rd.str("description"), OfferTo: rd.str("offer_to"),
		Provenance: rd.str("provenance"), Summary: rd.str("summary"), Source: rd.str("source"),
		To: rd.str("to"), Note: rd.str("note")}
	if v, ok := e.Fields["evidence"]; ok {
		t.Evidence = rd.indices("evidence", v)
	}
	if v, ok := e.Fields["snapshot"]; ok && rd.err == nil {
		t.Snapshot = &TaskSnapshot{}
		if err := decodeStrict(v, t.Snapshot); err != nil {
			rd.fail("snapshot", err.Error())
		}
	}
	if v, ok := e.Fields["prev"]; ok && rd.err == nil {
		t.Prev = &TaskEntryRef{}
		if err := decodeStrict(v, t.Prev); err != nil {
			rd.fail("prev", err.Error())
		} else if !isLeafHex(t.Prev.LeafHash) {
			rd.fail("prev", "leaf_hash is not 64 lowercase hex digits")
		}
	}
	if rd.err != nil {
		return nil, fmt.Errorf("%s entry: %w", e.Kind, rd.err)
	}
	return t, nil
}

// isLeafHex reports whether s is a leaf hash in lowercase hex.
func isLeafHex(s string) bool {
	if len(s) != 2*HashSize {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// indices reads v, the member k, as a non-empty list of log indices.
func (r *fieldReader) indices(k string, v any) []uint64 {
	list, ok := v.([]any)
	if !ok {
		r.fail(k, "not an array")
		return nil
	}
	if len(list) == 0 {
		r.fail(k, "empty; empty evidence is written by leaving it out")
		return nil
	}
	out := make([]uint64, len(list))
	for i, x := range list {
		n, ok := x.(json.Number)
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if !ok || err != nil {
			r.fail(k, "holds something other than a log index")
			return nil
		}
		out[i] = u
	}
	return out
}

// decodeStrict decodes v, a decoded JSON value, into dst, refusing members
// dst does not have or names otherwise ([DecodeStrict]).
func decodeStrict(v, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := DecodeStrict(b, dst); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "json: ", ""))
	}
	return nil
}
