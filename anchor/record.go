package anchor

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/provlog/provlog/anchor/rekor"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// RecordVersion is the value of every record's "v" field.
const RecordVersion = 1

// Kinds of transparency-log anchors a [Tlog] may hold.
const (
	// KindRekorV1 is a Sigstore Rekor v1 hashedrekord v0.0.1 entry.
	KindRekorV1 = "rekor.v1"
	// A Rekor v2 (rekor-tiles) anchor will be "rekor.v2": its
	// TransparencyLogEntry (hashedrekord v0.0.2 body, inclusion proof and
	// checkpoint envelope, no SET) goes into a RekorV2 field beside
	// RekorV1, checked against a pinned note verifier. Rekor v2 gives no
	// time, which the record's RFC 3161 tokens already provide.
)

// A Record is everything needed to check one anchor offline: the signed
// checkpoint that was anchored, the SHA-256 of its note that the
// authorities vouched for, the anchoring key, a consistency proof from the
// previously anchored checkpoint, and what each authority returned.
//
// Its stored form is the RFC 8785 canonical JSON that [Record.Marshal]
// returns; byte slices are base64, digests hex.
type Record struct {
	V int `json:"v"`
	// Checkpoint is the signed checkpoint note exactly as the log signed
	// it (note text, blank line, signature lines).
	Checkpoint string `json:"checkpoint"`
	// Origin, Size and Root repeat the checkpoint's body.
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   []byte `json:"root"`
	// Digest is the hex SHA-256 of Checkpoint: what the TSAs time-stamped
	// and the Rekor entry's hash.
	Digest string `json:"checkpoint_sha256"`
	// AnchorKey is the anchoring public key (PKIX DER) that signed the
	// Rekor entries.
	AnchorKey []byte `json:"anchor_key"`
	// Previous proves this checkpoint consistent with the previously
	// anchored one; nil for the first anchor.
	Previous *Consistency `json:"previous,omitempty"`
	// Timestamps are the RFC 3161 tokens, one per TSA that answered.
	Timestamps []*rfc3161.Token `json:"timestamps"`
	// Tlogs are the transparency-log entries, one per log that answered.
	Tlogs []*Tlog `json:"tlogs"`
	// Created is when the record was made (informative; the authorities'
	// times are the ones to trust).
	Created time.Time `json:"created"`
}

// Consistency is an RFC 6962 consistency proof from the tree of Size with
// root Root (the previously anchored checkpoint) to the record's tree.
type Consistency struct {
	Size  uint64   `json:"size"`
	Root  []byte   `json:"root"`
	Proof [][]byte `json:"proof"`
}

// A Tlog is one transparency-log anchor; Kind says which field is set.
type Tlog struct {
	Kind    string       `json:"kind"`
	RekorV1 *rekor.Entry `json:"rekor_v1,omitempty"`
}

// Marshal returns the record's stored form: RFC 8785 canonical JSON.
func (r *Record) Marshal() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding anchor record: %w", err)
	}
	c, err := log.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing anchor record: %w", err)
	}
	return c, nil
}

// ParseRecord parses a stored record. It refuses unknown fields and
// versions, so a record it accepts is fully understood by [Verify]; it
// checks shape only, not validity.
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := log.DecodeStrict(b, &r); err != nil {
		return nil, fmt.Errorf("anchor record: %w", err)
	}
	if r.V != RecordVersion {
		return nil, fmt.Errorf("anchor record: version %d, want %d", r.V, RecordVersion)
	}
	for i, t := range r.Timestamps {
		if t == nil {
			return nil, fmt.Errorf("anchor record: timestamp %d is null", i)
		}
	}
	for i, t := range r.Tlogs {
		if t == nil {
			return nil, fmt.Errorf("anchor record: tlog %d is null", i)
		}
	}
	return &r, nil
}

// CheckpointDigest returns the SHA-256 of a signed checkpoint note: the
// digest every TSA token and Rekor entry of a record is over.
func CheckpointDigest(note []byte) []byte {
	h := sha256.Sum256(note)
	return h[:]
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
