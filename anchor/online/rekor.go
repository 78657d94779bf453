package online

import (
	"bytes"
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
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/anchor/rekor"
	"github.com/provlog/provlog/log"
)

// MaxRekorResponse bounds a Rekor response: an entry with its inclusion
// proof and checkpoint is a few kilobytes.
const MaxRekorResponse = 1 << 20

// A RekorClient writes entries to one Sigstore Rekor v1 instance through
// its REST API: POST /api/v1/log/entries with a hashedrekord v0.0.1, as
// Rekor's own client (github.com/sigstore/rekor v1.5.4, pkg/client) sends
// it. What Rekor answers is checked offline by [rekor.Entry.Check].
type RekorClient struct {
	// URL is the Rekor base URL (https://rekor.sigstore.dev); the API's
	// paths go under its path.
	URL string
	// PublicKey is the pinned Rekor public key; responses that do not
	// verify with it are refused.
	PublicKey crypto.PublicKey
	// Signer is the P-256 anchoring key.
	Signer *ecdsa.PrivateKey
	// HTTPClient sends the requests; nil means http.DefaultClient. Bound
	// each call with the context.
	HTTPClient *http.Client
}

// Upload creates a hashedrekord entry for digest (SHA-256) signed with
// c.Signer, and returns it only if [rekor.Entry.Check] accepts it against
// c.PublicKey. It makes one request, without retries: the caller retries
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
	var p rekor.Hashedrekord
	p.APIVersion, p.Kind = "0.0.1", "hashedrekord"
	p.Spec.Data.Hash.Algorithm, p.Spec.Data.Hash.Value = "sha256", hex.EncodeToString(digest)
	p.Spec.Signature.Content = sig
	p.Spec.Signature.PublicKey.Content = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	body, err := json.Marshal(&p)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, "", body, http.StatusCreated)
	if err != nil {
		return nil, fmt.Errorf("creating Rekor entry: %w", err)
	}
	e, err := parseCreated(resp)
	if err != nil {
		return nil, fmt.Errorf("creating Rekor entry: %w", err)
	}
	e.URL, e.PublicKey = log.RedactURL(c.URL), rekorDER // the record, and the log's anchor entry, keep no credential
	// Check what will be stored: the entry's bytes as Rekor sent them are
	// what an auditor verifies later.
	if err := e.Check(ctx, digest, &c.Signer.PublicKey, []crypto.PublicKey{c.PublicKey}); err != nil {
		return nil, fmt.Errorf("Rekor entry refused: %w", err)
	}
	if err := checkClock("Rekor's integrated", time.Unix(e.IntegratedTime, 0)); err != nil {
		return nil, fmt.Errorf("Rekor entry refused: %w", err)
	}
	return e, nil
}

// parseCreated reads Rekor's answer to a created entry, a JSON object of
// one member: the entry's UUID and the entry (a LogEntryAnon), whose bytes
// are kept as they came.
func parseCreated(b []byte) (*rekor.Entry, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("Rekor's answer does not parse: %w", err)
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("Rekor returned %d entries, want 1", len(m))
	}
	e := &rekor.Entry{}
	for uuid, raw := range m {
		// The fields repeated beside the entry; Check makes sure they are
		// there and agree with it.
		var f struct {
			IntegratedTime int64  `json:"integratedTime"`
			LogID          string `json:"logID"`
			LogIndex       int64  `json:"logIndex"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("Rekor's entry %s does not parse: %w", uuid, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return nil, err
		}
		e.UUID, e.LogIndex, e.IntegratedTime, e.LogID, e.Entry = uuid, f.LogIndex, f.IntegratedTime, f.LogID, compact.Bytes()
	}
	return e, nil
}

// do sends a request, a proposed entry (POST, u empty: the entries' URL)
// or a GET of u, and returns the body of an answer of status want.
func (c *RekorClient) do(ctx context.Context, method, u string, body []byte, want int) ([]byte, error) {
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	if u == "" {
		var err error
		if u, err = log.JoinURL(c.URL, "api/v1/log/entries"); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "provlog")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, log.RedactURLError(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxRekorResponse+1))
	if err != nil {
		return nil, fmt.Errorf("reading Rekor's answer: %w", err)
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("Rekor answered %s: %s", resp.Status, snippet(b, c.URL))
	}
	if len(b) > MaxRekorResponse {
		return nil, fmt.Errorf("Rekor's answer is over %d bytes", MaxRekorResponse)
	}
	return b, nil
}

// Link keeps in e, an entry Upload just returned for digest, Rekor's
// consistency proof from the checkpoint of prev (this Rekor's newest
// linked entry of the tree before, or its first; nil if there is none) to
// e's, and checks e again with it ([rekor.Entry.Check]). A prev of
// another tree (Rekor started a new shard) has nothing to link. A proof that does not verify shows
// that Rekor presented two histories: the error says "Rekor fork", and e
// must not be kept. A proof Rekor did not give (an error answer, a
// timeout, bytes that are no proof) leaves e as Upload checked it,
// unlinked, and the error wraps [errUnlinked]: e is kept, as records
// made before the proof was kept are (the audit names them), for Rekor
// holds it for good and a retry would only make another.
func (c *RekorClient) Link(ctx context.Context, e, prev *rekor.Entry, digest []byte) error {
	if prev == nil {
		return nil
	}
	old, err := prev.Checkpoint()
	if err != nil {
		return fmt.Errorf("the Rekor checkpoint of the record before: %w", err)
	}
	cur, err := e.Checkpoint()
	if err != nil || old.Origin != cur.Origin || prev.LogID != e.LogID {
		return err
	}
	link := &rekor.Consistency{Checkpoint: old.Note, Proof: [][]byte{}}
	if old.Size < cur.Size {
		// Equal sizes need no proof; a smaller size now fails the check.
		if link.Proof, err = c.proof(ctx, cur.Origin, old.Size, cur.Size); err != nil {
			return fmt.Errorf("%w: fetching it from size %d to %d: %w", errUnlinked, old.Size, cur.Size, err)
		}
	}
	e.Consistency = link
	if err := e.Check(ctx, digest, &c.Signer.PublicKey, []crypto.PublicKey{c.PublicKey}); err != nil {
		e.Consistency = nil
		return fmt.Errorf("Rekor entry refused: %w", err)
	}
	return nil
}

// errUnlinked is what [RekorClient.Link] wraps when Rekor's consistency
// proof could not be had: the entry stands on its own checks.
var errUnlinked = errors.New("Rekor entry kept without its consistency proof from the entry before")

// proof gets Rekor's consistency proof from size first to last of the
// tree origin ("HOST - TREEID") names: GET /api/v1/log/proof, as Rekor's
// own client (pkg/client/tlog GetLogProof) asks for it.
func (c *RekorClient) proof(ctx context.Context, origin string, first, last uint64) ([][]byte, error) {
	_, tree, _ := strings.Cut(origin, " - ")
	q := url.Values{"firstSize": {strconv.FormatUint(first, 10)}, "lastSize": {strconv.FormatUint(last, 10)}, "treeID": {tree}}
	u, err := log.JoinURL(c.URL, "api/v1/log/proof?"+q.Encode())
	if err != nil {
		return nil, err
	}
	b, err := c.do(ctx, http.MethodGet, u, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return parseProof(b)
}

// parseProof reads Rekor's models.ConsistencyProof: its hashes, hex. Its
// root hash is left: it is Rekor's latest, which may be of a larger tree
// than asked for; the proof is checked against the signed checkpoints.
func parseProof(b []byte) ([][]byte, error) {
	var p struct {
		Hashes []string `json:"hashes"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("Rekor's answer does not parse: %w", err)
	}
	if len(p.Hashes) > 64 {
		return nil, fmt.Errorf("Rekor's proof has %d hashes, over 64", len(p.Hashes))
	}
	out := make([][]byte, len(p.Hashes))
	for i, h := range p.Hashes {
		var err error
		if out[i], err = hex.DecodeString(h); err != nil || len(out[i]) != sha256.Size {
			return nil, fmt.Errorf("Rekor's proof hash %d is not a hex SHA-256", i)
		}
	}
	return out, nil
}
