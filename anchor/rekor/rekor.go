// Package rekor checks offline, with the standard library and merkle
// alone, the Sigstore Rekor v1 entries provlog anchors with: a
// hashedrekord v0.0.1 entry over a SHA-256 digest, signed with an ECDSA
// P-256 anchoring key. (The client that makes them, over Rekor's REST
// API, is anchor/online's RekorClient: a verifier does not import it.)
//
// # What an entry must satisfy
//
// [Entry.Check] accepts an entry only if all of these hold:
//
//   - its log ID is the SHA-256 of a pinned Rekor public key's PKIX DER,
//     and that key verifies the entry as Rekor's pkg/verify.VerifyLogEntry
//     does: the inclusion proof of the body's leaf hash, the signed Rekor
//     checkpoint of the proof's tree size whose root the proof reaches
//     (every signature on it by that key; Rekor's own check compares the
//     roots only), and the signed entry timestamp (SET) over the RFC 8785
//     form of body, integrated time, log index and log ID;
//   - its body is a hashedrekord v0.0.1 whose data hash is SHA-256 and
//     equals the digest, whose public key is the anchoring key, and whose
//     signature by that key over the digest verifies; so the entry binds
//     this digest to this key, not merely some digest to some key;
//   - its UUID ends in the leaf hash of its body, and the log index,
//     integrated time and log ID stored beside it agree with it;
//   - its [Consistency], when it keeps one, leads from an earlier
//     checkpoint of its tree, signed by that key, to its own: else Rekor
//     showed two histories, and the error says "Rekor fork".
//
// Rekor v1's public instance shards its log; the SET covers the global
// log index while the inclusion proof uses the index within the shard, and
// both are kept as Rekor returned them.
package rekor

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/transparency-dev/merkle/rfc6962"
)

// An Entry is an accepted Rekor v1 entry and what is needed to check it
// again offline. Its JSON form is part of provlog's stored anchor record.
type Entry struct {
	URL string `json:"url"`
	// UUID is the entry's UUID as Rekor returned it (tree ID + leaf hash).
	UUID string `json:"uuid"`
	// LogIndex, IntegratedTime (Unix seconds) and LogID repeat what the
	// entry says, for readers; Check makes sure they agree with it.
	LogIndex       int64  `json:"log_index"`
	IntegratedTime int64  `json:"integrated_time"`
	LogID          string `json:"log_id"`
	// PublicKey is the Rekor public key (PKIX DER) the entry verified
	// with when it was made.
	PublicKey []byte `json:"public_key"`
	// Entry is the models.LogEntryAnon JSON as Rekor returned it: body,
	// integrated time, log ID and index, SET, and the inclusion proof with
	// Rekor's signed checkpoint.
	Entry json.RawMessage `json:"entry"`
	// Consistency, when the record before held an entry of the same
	// Rekor tree, proves this entry's Rekor checkpoint consistent with
	// that entry's. Records made before provlog kept it, and those whose
	// proof Rekor did not give at upload, have none.
	Consistency *Consistency `json:"consistency,omitempty"`
}

// Consistency is Rekor's RFC 6962 consistency proof (GET
// /api/v1/log/proof) from an earlier signed Rekor checkpoint to the one
// an entry's inclusion proof comes with.
type Consistency struct {
	// Checkpoint is the earlier signed Rekor checkpoint note, as the
	// earlier entry holds it.
	Checkpoint string `json:"checkpoint"`
	// Proof is the proof's hashes (base64 in JSON; Rekor gives them hex).
	Proof [][]byte `json:"proof"`
}

// Time returns the entry's integrated time.
func (e *Entry) Time() time.Time { return time.Unix(e.IntegratedTime, 0).UTC() }

// Check verifies the entry offline, as the package documentation lists:
// it must verify with the one of rekorKeys whose log ID it names, and its
// body must bind digest to anchorKey. The error says which check failed.
func (e *Entry) Check(ctx context.Context, digest []byte, anchorKey crypto.PublicKey, rekorKeys []crypto.PublicKey) error {
	var le logEntry
	if err := json.Unmarshal(e.Entry, &le); err != nil {
		return fmt.Errorf("entry does not parse: %w", err)
	}
	body, err := checkShape(&le)
	if err != nil {
		return err
	}
	// Pin the key: the log ID says which key the entry claims, and that
	// key must be one we trust.
	var rekorKey crypto.PublicKey
	for _, k := range rekorKeys {
		if id, err := LogID(k); err == nil && id == *le.LogID {
			rekorKey = k
		}
	}
	if rekorKey == nil {
		return fmt.Errorf("entry's log ID %s is not that of a trusted Rekor key", *le.LogID)
	}
	// Rekor's three checks, in the order its VerifyLogEntry makes them.
	if err := checkInclusion(&le, body); err != nil {
		return fmt.Errorf("inclusion proof does not verify: %w", err)
	}
	if err := checkCheckpoint(&le, rekorKey, e.UUID); err != nil {
		return fmt.Errorf("Rekor checkpoint does not verify: %w", err)
	}
	if err := e.Consistency.check(&le, rekorKey); err != nil {
		return err
	}
	if err := checkSET(&le, rekorKey); err != nil {
		return fmt.Errorf("signed entry timestamp (SET) does not verify: %w", err)
	}
	if err := checkBody(body, digest, anchorKey); err != nil {
		return err
	}
	leaf := hex.EncodeToString(rfc6962.DefaultHasher.HashLeaf(body))
	if !strings.HasSuffix(e.UUID, leaf) || (len(e.UUID) != 64 && len(e.UUID) != 80) {
		return fmt.Errorf("UUID %s does not end in the body's leaf hash %s", e.UUID, leaf)
	}
	switch {
	case e.LogIndex != *le.LogIndex:
		return fmt.Errorf("stored log index %d is not the entry's %d", e.LogIndex, *le.LogIndex)
	case e.IntegratedTime != *le.IntegratedTime:
		return fmt.Errorf("stored integrated time %d is not the entry's %d", e.IntegratedTime, *le.IntegratedTime)
	case e.LogID != *le.LogID:
		return fmt.Errorf("stored log ID %s is not the entry's %s", e.LogID, *le.LogID)
	}
	if stored, err := x509.ParsePKIXPublicKey(e.PublicKey); err != nil || !sameKey(stored, rekorKey) {
		return errors.New("stored Rekor public key is not the key the entry verifies with")
	}
	return nil
}

// checkShape makes sure every field the verifiers dereference is present,
// and returns the decoded body.
func checkShape(le *logEntry) ([]byte, error) {
	switch {
	case le.Body == nil:
		return nil, errors.New("entry has no body")
	case le.IntegratedTime == nil, le.LogID == nil, le.LogIndex == nil:
		return nil, errors.New("entry lacks its integrated time, log ID or log index")
	case le.Verification == nil || len(le.Verification.SignedEntryTimestamp) == 0:
		return nil, errors.New("entry has no signed entry timestamp (SET)")
	case le.Verification.InclusionProof == nil:
		return nil, errors.New("entry has no inclusion proof")
	}
	p := le.Verification.InclusionProof
	if p.Checkpoint == nil || p.LogIndex == nil || p.RootHash == nil || p.TreeSize == nil {
		return nil, errors.New("entry's inclusion proof lacks its checkpoint, index, root or size")
	}
	if *p.LogIndex < 0 || *p.TreeSize < 0 {
		return nil, errors.New("entry's inclusion proof has a negative index or size")
	}
	s, ok := le.Body.(string)
	if !ok {
		return nil, fmt.Errorf("entry body is a %T, not a base64 string", le.Body)
	}
	body, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("entry body is not base64: %w", err)
	}
	return body, nil
}

// Hashedrekord is a hashedrekord v0.0.1 as Rekor's API takes it and as
// an entry's body holds it: the digest, its signature and the PEM public
// key, both base64 (encoding/json's []byte). It is the part of the body
// that binds the digest and the key.
type Hashedrekord struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Data struct {
			Hash struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature struct {
			Content   []byte `json:"content"`
			PublicKey struct {
				Content []byte `json:"content"`
			} `json:"publicKey"`
		} `json:"signature"`
	} `json:"spec"`
}

// checkBody checks that body is a hashedrekord binding digest to
// anchorKey with a valid signature.
func checkBody(body, digest []byte, anchorKey crypto.PublicKey) error {
	var h Hashedrekord
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("entry body does not parse: %w", err)
	}
	if h.Kind != "hashedrekord" || h.APIVersion != "0.0.1" {
		return fmt.Errorf("entry is a %s %s, not a hashedrekord 0.0.1", h.Kind, h.APIVersion)
	}
	if h.Spec.Data.Hash.Algorithm != "sha256" || h.Spec.Data.Hash.Value != hex.EncodeToString(digest) {
		return fmt.Errorf("entry is over %s:%s, not our digest sha256:%x", h.Spec.Data.Hash.Algorithm, h.Spec.Data.Hash.Value, digest)
	}
	blk, _ := pem.Decode(h.Spec.Signature.PublicKey.Content)
	if blk == nil {
		return errors.New("entry's public key is not PEM")
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return fmt.Errorf("entry's public key: %w", err)
	}
	if !sameKey(pub, anchorKey) {
		return errors.New("entry is signed by another key, not the log's anchoring key")
	}
	ek, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("entry's key is not ECDSA")
	}
	if !ecdsa.VerifyASN1(ek, digest, h.Spec.Signature.Content) {
		return errors.New("entry's signature by the anchoring key over the digest does not verify")
	}
	return nil
}

// LogID returns Rekor's log ID for its public key: the hex SHA-256 of the
// key's PKIX DER.
func LogID(k crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(der)
	return hex.EncodeToString(h[:]), nil
}
