package online

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/go-openapi/strfmt"
	"github.com/sigstore/rekor/pkg/client"
	"github.com/sigstore/rekor/pkg/generated/client/entries"
	"github.com/sigstore/rekor/pkg/generated/models"

	"github.com/provlog/provlog/anchor/rekor"
)

// A RekorClient writes entries to one Sigstore Rekor v1 instance, with
// Rekor's own generated client (github.com/sigstore/rekor v1.5.4).
type RekorClient struct {
	// URL is the Rekor base URL (https://rekor.sigstore.dev).
	URL string
	// PublicKey is the pinned Rekor public key; responses that do not
	// verify with it are refused.
	PublicKey crypto.PublicKey
	// Signer is the P-256 anchoring key.
	Signer *ecdsa.PrivateKey
}

// Upload creates a hashedrekord entry for digest (SHA-256) signed with
// c.Signer, and returns it only if [rekor.Entry.Check] accepts it against
// c.PublicKey. Rekor's client is used without retries: the caller retries
// with backoff. Bound the call with ctx.
func (c *RekorClient) Upload(ctx context.Context, digest []byte) (*rekor.Entry, error) {
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
	e := &rekor.Entry{URL: c.URL, PublicKey: rekorDER}
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

func ptr[T any](v T) *T { return &v }
