package log

import (
	"fmt"
	"time"
)

// An AnchorEntry is the kind-specific members of an `anchor` entry: it
// commits the log to a stored anchor record (by name and SHA-256) and to
// each authority's answer (by SHA-256), and repeats what a reader of the
// log wants to see without opening the record. Package anchor builds it
// from a record and writes it; readers below anchor (a bundle's
// verifier) read it with [ParseAnchorEntry].
type AnchorEntry struct {
	Size       uint64            `json:"size"`
	Root       string            `json:"root"` // base64, as in the checkpoint
	Digest     string            `json:"checkpoint_sha256"`
	Record     string            `json:"record"`
	RecordHash string            `json:"record_sha256"`
	Timestamps []AnchorTimestamp `json:"timestamps"`
	Tlogs      []AnchorTlog      `json:"tlogs"`
	// Sidecar names the sidecar that made the record and keeps it in
	// its data dir (<data>/anchors/sidecar.id): sidecars sharing one log
	// each anchor it, and an audit of one sidecar's data dir tells the
	// records it must hold from those kept elsewhere. Absent in entries
	// written before it was added, whose records the data dir must hold.
	Sidecar string `json:"sidecar,omitempty"`
}

// An AnchorTimestamp summarizes one RFC 3161 token of an anchor record.
type AnchorTimestamp struct {
	URL       string    `json:"url"`
	Time      time.Time `json:"time"`
	Serial    string    `json:"serial"`
	TokenHash string    `json:"token_sha256"`
}

// An AnchorTlog summarizes one transparency-log entry of an anchor record.
type AnchorTlog struct {
	Kind           string `json:"kind"`
	URL            string `json:"url"`
	LogIndex       int64  `json:"log_index"`
	UUID           string `json:"uuid"`
	IntegratedTime int64  `json:"integrated_time"`
	EntryHash      string `json:"entry_sha256"`
}

// ParseAnchorEntry reads the members of e, an `anchor` entry.
func ParseAnchorEntry(e *Entry) (*AnchorEntry, error) {
	if e.Kind != KindAnchor {
		return nil, fmt.Errorf("entry is a %q, not an anchor entry", e.Kind)
	}
	var a AnchorEntry
	if err := e.DecodeFields(&a); err != nil {
		return nil, err
	}
	return &a, nil
}
