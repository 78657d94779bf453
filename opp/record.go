package opp

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	// after is, on a shared log, the size the engine had read when it
	// checked the rules; the append is fenced on it (shared.go).
	after uint64
}

// fieldsOf lists the fields each kind may carry beside the common ones.
var fieldsOf = map[string]map[string]bool{
	KindCreate:  {"task_id": true, "title": true, "description": true, "offer_to": true},
	KindAccept:  {"task_id": true},
	KindClaim:   {"task_id": true, "provenance": true, "summary": true, "evidence": true, "source": true},
	KindHandoff: {"task_id": true, "to": true, "note": true, "snapshot": true},
	KindRelease: {"task_id": true, "note": true},
	KindCancel:  {"task_id": true, "note": true},
}

// marshal returns the entry bytes of r. Empty optional fields are left out.
func (r *record) marshal() ([]byte, error) {
	f := map[string]any{"task_id": r.taskID}
	opt := func(k, v string) {
		if v != "" {
			f[k] = v
		}
	}
	switch r.kind {
	case KindCreate:
		f["title"] = r.title
		opt("description", r.description)
		opt("offer_to", r.offerTo)
	case KindAccept:
	case KindClaim:
		f["provenance"] = string(r.provenance)
		f["summary"] = r.summary
		if len(r.evidence) > 0 {
			f["evidence"] = r.evidence
		}
		opt("source", r.source)
	case KindHandoff:
		f["to"] = r.to
		opt("note", r.note)
		f["snapshot"] = r.snapshot
	case KindRelease, KindCancel:
		opt("note", r.note)
	default:
		return nil, fmt.Errorf("unknown task entry kind %q", r.kind)
	}
	e := &log.Entry{Kind: r.kind, Time: r.time, Actor: r.actor, Auth: r.auth, Fields: f}
	return e.Marshal()
}

// wireRecord is the JSON shape of every task entry kind.
type wireRecord struct {
	TaskID      *string   `json:"task_id"`
	Title       *string   `json:"title"`
	Description string    `json:"description"`
	OfferTo     string    `json:"offer_to"`
	Provenance  *string   `json:"provenance"`
	Summary     *string   `json:"summary"`
	Evidence    []uint64  `json:"evidence"`
	Source      string    `json:"source"`
	To          *string   `json:"to"`
	Note        string    `json:"note"`
	Snapshot    *Snapshot `json:"snapshot"`
}

// isTaskEntry reports cheaply whether b may be a task entry: a canonical
// entry of a task kind holds `"kind":"task.` with these very quotes (inside
// a string value they would be escaped). A match may still be a nested
// key, so the caller parses to be sure.
func isTaskEntry(b []byte) bool { return bytes.Contains(b, []byte(`"kind":"task.`)) }

// parseRecord parses a task entry. It returns (nil, nil) for entries of
// other kinds, and a *RuleError for a task entry that is malformed.
func parseRecord(b []byte) (*record, error) {
	e, err := log.ParseEntry(b)
	if err != nil {
		return nil, err
	}
	allowed, ok := fieldsOf[e.Kind]
	if !ok {
		if len(e.Kind) > 5 && e.Kind[:5] == "task." {
			return nil, refuse(RuleEntry, "unknown task entry kind %q", e.Kind)
		}
		return nil, nil
	}
	for k := range e.Fields {
		if !allowed[k] {
			return nil, refuse(RuleEntry, "%s entry has unexpected field %q", e.Kind, k)
		}
	}
	var w wireRecord // the common fields are ignored: ParseEntry checked them
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, refuse(RuleEntry, "%s entry fields do not decode: %v", e.Kind, err)
	}
	r := &record{kind: e.Kind, actor: e.Actor, auth: e.Auth, time: e.Time,
		description: w.Description, offerTo: w.OfferTo, evidence: w.Evidence,
		source: w.Source, note: w.Note, snapshot: w.Snapshot}
	need := func(name string, p *string) string {
		if p == nil {
			err = refuse(RuleEntry, "%s entry has no %q", e.Kind, name)
			return ""
		}
		return *p
	}
	r.taskID = need("task_id", w.TaskID)
	switch e.Kind {
	case KindCreate:
		r.title = need("title", w.Title)
	case KindClaim:
		r.provenance = Provenance(need("provenance", w.Provenance))
		r.summary = need("summary", w.Summary)
		if w.Evidence != nil && len(w.Evidence) == 0 {
			err = refuse(RuleEntry, "empty evidence is written by leaving it out")
		}
	case KindHandoff:
		r.to = need("to", w.To)
		if w.Snapshot == nil {
			err = refuse(RuleSnapshot, "handoff entry carries no snapshot")
		}
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}
