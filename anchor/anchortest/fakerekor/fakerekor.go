// Package fakerekor is a small Rekor v1 for unit tests: it accepts
// hashedrekord v0.0.1 entries, checks their signature as Rekor does, keeps
// an RFC 6962 tree, and answers with an entry carrying a SET, an inclusion
// proof and a signed checkpoint made the way rekor-server makes them (the
// checkpoint with rekor's own pkg/util). Its entries pass rekor's
// pkg/verify.VerifyLogEntry; the tests check that, and the real
// rekor-server is tested against as well. Faults can be switched on.
//
// Test code only; nothing in the product imports it.
package fakerekor

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
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/util"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/provlog/provlog/log"
)

// A Fault makes the fake misbehave.
type Fault int

const (
	OK          Fault = iota
	Down              // answers 503
	Slow              // waits (Rekor.SetDelay) before answering
	Garbage           // answers 201 with bytes that are not JSON
	OtherDigest       // logs and returns an entry over another digest, by another key
	OtherLogKey       // signs the SET and checkpoint with a key that is not the pinned one
	BadSET            // returns a SET that does not verify
	BadProof          // returns an inclusion proof that does not verify
	NoProof           // returns no inclusion proof
	OldTime           // logs the entry with an integrated time of 2001-01-01, far from the clock
	OtherSize         // signs the checkpoint with the proof's root but a tree size one larger than the proof's
	OtherOrigin       // signs the checkpoint under the origin of another tree than the entry's UUID names
	Rollback          // forgets its tree and logs the entry into a new one: its sizes come again with other roots (a fork)
	Fork              // puts other leaves in place of every one it holds, then logs the entry: its tree grows, but does not extend the one it showed before (a fork)
	NewTree           // leaves its tree for a fresh one under the next tree ID (as Rekor starts a new shard; a fork may say the same) and logs the entry there
)

// Rekor is the fake, on a loopback HTTP server.
type Rekor struct {
	URL       string
	PublicKey crypto.PublicKey

	key      *ecdsa.PrivateKey
	otherKey *ecdsa.PrivateKey
	treeID   int64

	mu      sync.Mutex
	tree    *testonly.Tree
	fault   Fault
	delay   time.Duration
	created int
}

// New starts a fake Rekor; it stops when the test ends.
func New(t testing.TB) *Rekor {
	t.Helper()
	k1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r := &Rekor{
		PublicKey: k1.Public(),
		key:       k1,
		otherKey:  k2,
		treeID:    4242424242,
		tree:      testonly.New(rfc6962.DefaultHasher),
		delay:     5 * time.Second,
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// SetFault switches the fake's behaviour for the following requests.
func (r *Rekor) SetFault(f Fault) {
	r.mu.Lock()
	r.fault = f
	r.mu.Unlock()
}

// SetDelay sets how long a Slow fake waits.
func (r *Rekor) SetDelay(d time.Duration) {
	r.mu.Lock()
	r.delay = d
	r.mu.Unlock()
}

// Created returns how many entries the fake logged.
func (r *Rekor) Created() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created
}

// PublicKeyPEM returns the pinned key as PEM.
func (r *Rekor) PublicKeyPEM() []byte {
	der, _ := x509.MarshalPKIXPublicKey(r.PublicKey)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func (r *Rekor) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/api/v1/log/publicKey":
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(r.PublicKeyPEM())
	case req.Method == http.MethodPost && req.URL.Path == "/api/v1/log/entries":
		r.create(w, req)
	case req.Method == http.MethodGet && req.URL.Path == "/api/v1/log/proof":
		r.proof(w, req)
	default:
		writeError(w, http.StatusNotFound, "not found")
	}
}

// proposed is a proposed hashedrekord entry, in Rekor's own generated
// types (not anchor/rekor's, which the fake's entries are checked by).
type proposed struct {
	APIVersion string                        `json:"apiVersion"`
	Kind       string                        `json:"kind"`
	Spec       models.HashedrekordV001Schema `json:"spec"`
}

func (r *Rekor) create(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	fault, delay := r.fault, r.delay
	r.mu.Unlock()
	switch fault {
	case Down:
		writeError(w, http.StatusServiceUnavailable, "unavailable")
		return
	case Slow:
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
	case Garbage:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("<html>not json</html>"))
		return
	}
	p, msg := readProposed(req)
	if p == nil {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if fault == OtherDigest {
		// Log a valid entry, but for something else by someone else.
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		d := sha256.Sum256([]byte("something else"))
		sig, _ := ecdsa.SignASN1(rand.Reader, k, d[:])
		der, _ := x509.MarshalPKIXPublicKey(k.Public())
		*p.Spec.Data.Hash.Value = hex.EncodeToString(d[:])
		p.Spec.Signature.Content = sig
		p.Spec.Signature.PublicKey.Content = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	raw, _ := json.Marshal(p)
	body, err := log.Canonicalize(raw)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	signer := r.key
	if fault == OtherLogKey {
		signer = r.otherKey
	}
	switch fault {
	case Rollback:
		r.mu.Lock()
		r.tree = testonly.New(rfc6962.DefaultHasher)
		r.mu.Unlock()
	case NewTree:
		r.mu.Lock()
		r.tree = testonly.New(rfc6962.DefaultHasher)
		r.treeID++
		r.mu.Unlock()
	case Fork:
		r.mu.Lock()
		forged := testonly.New(rfc6962.DefaultHasher)
		for i := range r.tree.Size() {
			forged.AppendData(fmt.Appendf(nil, "forged leaf %d", i))
		}
		r.tree = forged
		r.mu.Unlock()
	}
	at := time.Now()
	if fault == OldTime {
		at = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	uuid, entry, err := r.logEntry(req.Context(), body, signer, at)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	switch fault {
	case BadSET:
		entry.Verification.SignedEntryTimestamp[10] ^= 1
	case BadProof:
		entry.Verification.InclusionProof.Hashes = append(entry.Verification.InclusionProof.Hashes, hex.EncodeToString(make([]byte, 32)))
	case NoProof:
		entry.Verification.InclusionProof = nil
	case OtherSize:
		if err := r.resign(req.Context(), entry.Verification.InclusionProof, 1, r.treeID); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	case OtherOrigin:
		if err := r.resign(req.Context(), entry.Verification.InclusionProof, 0, r.treeID+1); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	out, _ := json.Marshal(models.LogEntry{uuid: *entry})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", uuid)
	w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
	w.WriteHeader(http.StatusCreated)
	w.Write(out)
}

// readProposed reads the request's proposed entry and checks it as Rekor
// does: a hashedrekord 0.0.1 over a SHA-256 digest, signed by the ECDSA
// key it carries. It returns nil and Rekor's message for one that fails.
func readProposed(req *http.Request) (*proposed, string) {
	b, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		return nil, err.Error()
	}
	p := &proposed{}
	if err := json.Unmarshal(b, p); err != nil || p.Kind != "hashedrekord" || p.APIVersion != "0.0.1" ||
		p.Spec.Validate(strfmt.Default) != nil || p.Spec.Data.Hash == nil || p.Spec.Signature.PublicKey == nil {
		return nil, "not a hashedrekord 0.0.1 entry"
	}
	hash := p.Spec.Data.Hash
	digest, err := hex.DecodeString(*hash.Value)
	if err != nil || *hash.Algorithm != "sha256" || len(digest) != sha256.Size {
		return nil, "bad hash"
	}
	blk, _ := pem.Decode(p.Spec.Signature.PublicKey.Content)
	if blk == nil {
		return nil, "public key is not PEM"
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	ek, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok || !ecdsa.VerifyASN1(ek, digest, p.Spec.Signature.Content) {
		// What Rekor answers for a signature that does not verify.
		return nil, "verifying signature: invalid signature when validating ASN.1 encoded signature"
	}
	return p, ""
}

// logEntry appends body and returns its UUID and entry, signed by signer.
func (r *Rekor) logEntry(ctx context.Context, body []byte, signer *ecdsa.PrivateKey, at time.Time) (string, *models.LogEntryAnon, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tree.AppendData(body)
	r.created++
	idx := int64(r.tree.Size() - 1)
	size := int64(r.tree.Size())
	root := r.tree.Hash()
	hashes, err := r.tree.InclusionProof(uint64(idx), uint64(size))
	if err != nil {
		return "", nil, err
	}
	var hexHashes []string
	for _, h := range hashes {
		hexHashes = append(hexHashes, hex.EncodeToString(h))
	}
	sv, err := signature.LoadECDSASigner(signer, crypto.SHA256)
	if err != nil {
		return "", nil, err
	}
	cp, err := util.CreateAndSignCheckpoint(ctx, "rekor.fake", r.treeID, uint64(size), root, sv)
	if err != nil {
		return "", nil, err
	}
	der, _ := x509.MarshalPKIXPublicKey(r.PublicKey)
	id := sha256.Sum256(der)
	logID := hex.EncodeToString(id[:])
	now := at.Unix()
	b64 := base64.StdEncoding.EncodeToString(body)
	// The SET: a signature over the canonical JSON of body, integrated
	// time, log index and log ID.
	setJSON, _ := json.Marshal(map[string]any{"body": b64, "integratedTime": now, "logIndex": idx, "logID": logID})
	canon, err := log.Canonicalize(setJSON)
	if err != nil {
		return "", nil, err
	}
	set, err := sv.SignMessage(bytes.NewReader(canon))
	if err != nil {
		return "", nil, err
	}
	cps := string(cp)
	rootHex := hex.EncodeToString(root)
	uuid := fmt.Sprintf("%016x%s", r.treeID, hex.EncodeToString(rfc6962.DefaultHasher.HashLeaf(body)))
	return uuid, &models.LogEntryAnon{
		Body:           b64,
		IntegratedTime: &now,
		LogID:          &logID,
		LogIndex:       &idx,
		Verification: &models.LogEntryAnonVerification{
			SignedEntryTimestamp: strfmt.Base64(set),
			InclusionProof: &models.InclusionProof{
				Checkpoint: &cps,
				Hashes:     hexHashes,
				LogIndex:   &idx,
				RootHash:   &rootHex,
				TreeSize:   &size,
			},
		},
	}, nil
}

// resign replaces the proof's checkpoint with one for a tree size extra
// entries larger, over the same root, with the origin of tree treeID,
// signed as Rekor signs.
func (r *Rekor) resign(ctx context.Context, p *models.InclusionProof, extra uint64, treeID int64) error {
	sv, err := signature.LoadECDSASigner(r.key, crypto.SHA256)
	if err != nil {
		return err
	}
	root, err := hex.DecodeString(*p.RootHash)
	if err != nil {
		return err
	}
	cp, err := util.CreateAndSignCheckpoint(ctx, "rekor.fake", treeID, uint64(*p.TreeSize)+extra, root, sv)
	if err != nil {
		return err
	}
	cps := string(cp)
	p.Checkpoint = &cps
	return nil
}

// proof answers GET /api/v1/log/proof as rekor-server does: Rekor's
// consistency proof from firstSize (default 1) to lastSize of the tree it
// holds now, with that tree's root hash, each hex. A treeID other than
// its own is refused.
func (r *Rekor) proof(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	first, last := int64(1), int64(-1)
	if s := q.Get("firstSize"); s != "" {
		first, _ = strconv.ParseInt(s, 10, 64)
	}
	if s := q.Get("lastSize"); s != "" {
		last, _ = strconv.ParseInt(s, 10, 64)
	}
	if id := q.Get("treeID"); id != "" && id != strconv.FormatInt(r.treeID, 10) {
		writeError(w, http.StatusBadRequest, "invalid tree ID specified: "+id)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if first < 1 || last < first || uint64(last) > r.tree.Size() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bad sizes %d, %d (tree size %d)", first, last, r.tree.Size()))
		return
	}
	hashes, err := r.tree.ConsistencyProof(uint64(first), uint64(last))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	hexHashes := []string{}
	for _, h := range hashes {
		hexHashes = append(hexHashes, hex.EncodeToString(h))
	}
	root := hex.EncodeToString(r.tree.Hash())
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(models.ConsistencyProof{RootHash: &root, Hashes: hexHashes})
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg})
}
