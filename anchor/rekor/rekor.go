// Package rekor anchors a SHA-256 digest in a Sigstore Rekor v1 log as a
// hashedrekord v0.0.1 entry signed with an ECDSA P-256 anchoring key, using
// Rekor's own client (github.com/sigstore/rekor v1.5.4), and checks such
// entries offline.
//
// # What an entry must satisfy
//
// [Entry.Check] accepts an entry only if all of these hold:
//
//   - its log ID is the SHA-256 of a pinned Rekor public key's PKIX DER,
//     and that key verifies the entry with Rekor's pkg/verify.VerifyLogEntry:
//     the inclusion proof of the body's leaf hash, the signed Rekor
//     checkpoint whose root the proof reaches, and the signed entry
//     timestamp (SET) over body, integrated time, log index and log ID;
//   - its body is a hashedrekord v0.0.1 whose data hash is SHA-256 and
//     equals the digest, whose public key is the anchoring key, and whose
//     signature by that key over the digest verifies; so the entry binds
//     this digest to this key, not merely some digest to some key;
//   - its UUID ends in the leaf hash of its body, and the log index,
//     integrated time and log ID stored beside it agree with it.
//
// Rekor v1's public instance shards its log; the SET covers the global
// log index while the inclusion proof uses the index within the shard, and
// both are kept as Rekor returned them.
package rekor

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

	"github.com/go-openapi/strfmt"
	"github.com/sigstore/rekor/pkg/client"
	"github.com/sigstore/rekor/pkg/generated/client/entries"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
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
}

// A Client writes entries to one Rekor v1 instance.
type Client struct {
	// URL is the Rekor base URL (https://rekor.sigstore.dev).
	URL string
	// PublicKey is the pinned Rekor public key; responses that do not
	// verify with it are refused.
	PublicKey crypto.PublicKey
	// Signer is the P-256 anchoring key.
	Signer *ecdsa.PrivateKey
}

// Upload creates a hashedrekord entry for digest (SHA-256) signed with
// c.Signer, and returns it only if [Entry.Check] accepts it against
// c.PublicKey. Rekor's client is used without retries: the caller retries
// with backoff. Bound the call with ctx.
func (c *Client) Upload(ctx context.Context, digest []byte) (*Entry, error) {
	if len(digest) != sha256.Size {
		return nil, fmt.Errorf("digest is %d bytes, not a SHA-256", len(digest))
	}
	if c.Signer == nil || c.Signer.Curve != elliptic.P256() {
		return nil, errors.New("anchoring key must be ECDSA P-256")
	}
	rekorDER, err := x509.MarshalPKIXPublicKey(c.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("pinned Rekor key: %w", err)
	}
	sig, err := ecdsa.SignASN1(rand.Reader, c.Signer, digest)
	if err != nil {
		return nil, fmt.Errorf("signing digest: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&c.Signer.PublicKey)
	if err != nil {
		return nil, err
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	proposed := &models.Hashedrekord{
		APIVersion: ptr("0.0.1"),
		Spec: models.HashedrekordV001Schema{
			Data: &models.HashedrekordV001SchemaData{Hash: &models.HashedrekordV001SchemaDataHash{
				Algorithm: ptr(models.HashedrekordV001SchemaDataHashAlgorithmSha256),
				Value:     ptr(hex.EncodeToString(digest)),
			}},
			Signature: &models.HashedrekordV001SchemaSignature{
				Content:   strfmt.Base64(sig),
				PublicKey: &models.HashedrekordV001SchemaSignaturePublicKey{Content: strfmt.Base64(pubPEM)},
			},
		},
	}
	rc, err := client.GetRekorClient(c.URL, client.WithRetryCount(0), client.WithUserAgent("provlog"))
	if err != nil {
		return nil, fmt.Errorf("Rekor client: %w", err)
	}
	params := entries.NewCreateLogEntryParamsWithContext(ctx)
	params.SetProposedEntry(proposed)
	resp, err := rc.Entries.CreateLogEntry(params)
	if err != nil {
		return nil, fmt.Errorf("creating Rekor entry: %w", err)
	}
	if len(resp.Payload) != 1 {
		return nil, fmt.Errorf("Rekor returned %d entries, want 1", len(resp.Payload))
	}
	e := &Entry{URL: c.URL, PublicKey: rekorDER}
	for uuid, le := range resp.Payload {
		e.UUID = uuid
		if le.LogIndex != nil {
			e.LogIndex = *le.LogIndex
		}
		if le.IntegratedTime != nil {
			e.IntegratedTime = *le.IntegratedTime
		}
		if le.LogID != nil {
			e.LogID = *le.LogID
		}
		if e.Entry, err = json.Marshal(le); err != nil {
			return nil, fmt.Errorf("encoding Rekor entry: %w", err)
		}
	}
	// Check what will be stored, not what was decoded: the stored bytes
	// are what an auditor verifies later.
	if err := e.Check(ctx, digest, &c.Signer.PublicKey, []crypto.PublicKey{c.PublicKey}); err != nil {
		return nil, fmt.Errorf("Rekor entry refused: %w", err)
	}
	return e, nil
}

// Time returns the entry's integrated time.
func (e *Entry) Time() time.Time { return time.Unix(e.IntegratedTime, 0).UTC() }

// Check verifies the entry offline, as the package documentation lists:
// it must verify with the one of rekorKeys whose log ID it names, and its
// body must bind digest to anchorKey. The error says which check failed.
func (e *Entry) Check(ctx context.Context, digest []byte, anchorKey crypto.PublicKey, rekorKeys []crypto.PublicKey) error {
	var le models.LogEntryAnon
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
	v, err := signature.LoadVerifier(rekorKey, crypto.SHA256)
	if err != nil {
		return fmt.Errorf("Rekor key: %w", err)
	}
	if err := verify.VerifyLogEntry(ctx, &le, v); err != nil {
		// Name the part that failed; these are the three checks
		// VerifyLogEntry makes, in its order.
		switch {
		case verify.VerifyInclusion(ctx, &le) != nil:
			return fmt.Errorf("inclusion proof does not verify: %w", err)
		case verify.VerifyCheckpointSignature(&le, v) != nil:
			return fmt.Errorf("Rekor checkpoint does not verify: %w", err)
		default:
			return fmt.Errorf("signed entry timestamp (SET) does not verify: %w", err)
		}
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
func checkShape(le *models.LogEntryAnon) ([]byte, error) {
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

// hashedrekord is the part of a hashedrekord v0.0.1 body that binds the
// digest and the key.
type hashedrekord struct {
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
	var h hashedrekord
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

func sameKey(a, b crypto.PublicKey) bool {
	ad, err1 := x509.MarshalPKIXPublicKey(a)
	bd, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(ad, bd)
}

func ptr[T any](v T) *T { return &v }
