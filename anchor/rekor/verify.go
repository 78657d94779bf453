package rekor

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
)

// logEntry is the part of a Rekor v1 LogEntryAnon (its JSON form, as the
// API returns it) that the checks read. Pointers tell a missing field from
// a zero one.
type logEntry struct {
	Body           any     `json:"body"`
	IntegratedTime *int64  `json:"integratedTime"`
	LogID          *string `json:"logID"`
	LogIndex       *int64  `json:"logIndex"`
	Verification   *struct {
		InclusionProof *struct {
			Checkpoint *string  `json:"checkpoint"`
			Hashes     []string `json:"hashes"`
			LogIndex   *int64   `json:"logIndex"`
			RootHash   *string  `json:"rootHash"`
			TreeSize   *int64   `json:"treeSize"`
		} `json:"inclusionProof"`
		SignedEntryTimestamp []byte `json:"signedEntryTimestamp"`
	} `json:"verification"`
}

// checkInclusion verifies the inclusion proof of the body's RFC 6962 leaf
// hash (checkShape has made sure every field is there).
func checkInclusion(le *logEntry, body []byte) error {
	p := le.Verification.InclusionProof
	hashes := make([][]byte, len(p.Hashes))
	for i, h := range p.Hashes {
		b, err := hex.DecodeString(h)
		if err != nil {
			return fmt.Errorf("proof hash %d: %w", i, err)
		}
		hashes[i] = b
	}
	root, err := hex.DecodeString(*p.RootHash)
	if err != nil {
		return fmt.Errorf("root hash: %w", err)
	}
	return proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(*p.LogIndex), uint64(*p.TreeSize),
		rfc6962.DefaultHasher.HashLeaf(body), hashes, root)
}

// A Checkpoint is the signed Rekor checkpoint an entry's inclusion proof
// comes with: its origin ("HOST - TREEID", as rekor-server writes it),
// tree size and root hash.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   []byte
	// Note is the signed note, as the entry holds it.
	Note string
}

// parseCheckpoint reads the body of a Rekor checkpoint note.
func parseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return Checkpoint{}, errors.New("checkpoint body is not origin, size and root")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint size: %w", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint root: %w", err)
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// checkCheckpoint verifies the signed checkpoint the inclusion proof comes
// with: a signed note whose every signature is by key (its 4-byte hint is
// the first four bytes of the SHA-256 of key's PKIX DER) under the name
// of the origin's host, and verifies; whose origin is "HOST - TREEID" of
// the tree the entry's UUID names (when it names one: 80 hex digits); and
// whose tree size and root are the proof's.
func checkCheckpoint(le *logEntry, key crypto.PublicKey, uuid string) error {
	p := le.Verification.InclusionProof
	cp, treeID, err := openCheckpoint(*p.Checkpoint, key)
	if err != nil {
		return err
	}
	if len(uuid) == 80 {
		if id, err := strconv.ParseUint(uuid[:16], 16, 64); err != nil || id != treeID {
			return fmt.Errorf("checkpoint origin %q is not of tree %s, which the entry's UUID names", log.Printable(cp.Origin), uuid[:16])
		}
	}
	// Rekor's own VerifyCheckpointSignature compares the roots only; the
	// proof is of a tree of its own size, which must be the one Rekor
	// signed, or the signature vouches for another tree than the proof's.
	if cp.Size != uint64(*p.TreeSize) {
		return fmt.Errorf("signed checkpoint is of tree size %d, the inclusion proof of tree size %d", cp.Size, *p.TreeSize)
	}
	if want, err := hex.DecodeString(*p.RootHash); err != nil || !bytes.Equal(want, cp.Root) {
		return fmt.Errorf("proof root hash %s is not the signed checkpoint's %x", *p.RootHash, cp.Root)
	}
	return nil
}

// openCheckpoint verifies a signed Rekor checkpoint note: every signature
// is by key (its 4-byte hint is the first four bytes of the SHA-256 of
// key's PKIX DER) under the name of the origin's host, and verifies; the
// origin is "HOST - TREEID". It returns the checkpoint and the tree ID.
func openCheckpoint(n string, key crypto.PublicKey) (Checkpoint, uint64, error) {
	text, sigs, err := splitNote(n)
	if err != nil {
		return Checkpoint{}, 0, err
	}
	cp, err := parseCheckpoint(text)
	if err != nil {
		return Checkpoint{}, 0, err
	}
	host, tree, ok := strings.Cut(cp.Origin, " - ")
	treeID, terr := strconv.ParseUint(tree, 10, 63)
	if !ok || host == "" || terr != nil {
		return Checkpoint{}, 0, fmt.Errorf("checkpoint origin %q is not \"HOST - TREEID\"", log.Printable(cp.Origin))
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return Checkpoint{}, 0, err
	}
	h := sha256.Sum256(der)
	hint := binary.BigEndian.Uint32(h[:4])
	for _, s := range sigs {
		if s.hint != hint {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint signed by %s with key hint %08x, not the Rekor key's %08x", s.name, s.hint, hint)
		}
		if s.name != host {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint signed under the name %s, not its origin's host %s", log.Printable(s.name), log.Printable(host))
		}
		if err := verifySignature(key, []byte(text), s.sig); err != nil {
			return Checkpoint{}, 0, fmt.Errorf("checkpoint signature: %w", err)
		}
	}
	return cp, treeID, nil
}

// check verifies c, an entry's consistency proof (nil: none to check),
// for the entry le, whose own checkpoint checkCheckpoint verified: the
// earlier checkpoint is signed by key, is of the same origin and no
// larger, and the proof leads from it to le's. A proof that fails shows
// that Rekor presented two histories: the error says "Rekor fork".
func (c *Consistency) check(le *logEntry, key crypto.PublicKey) error {
	if c == nil {
		return nil
	}
	cur, _, err := openCheckpoint(*le.Verification.InclusionProof.Checkpoint, key)
	if err != nil {
		return err
	}
	old, _, err := openCheckpoint(c.Checkpoint, key)
	if err != nil {
		return fmt.Errorf("the earlier Rekor checkpoint of its consistency proof does not verify: %w", err)
	}
	if old.Origin != cur.Origin {
		return fmt.Errorf("its consistency proof starts from a checkpoint of %q, not of its own tree %q", log.Printable(old.Origin), log.Printable(cur.Origin))
	}
	if old.Size > cur.Size {
		// Not proof of a fork by itself: a Rekor replica behind the one
		// that answered before shows a smaller tree too.
		return fmt.Errorf("its checkpoint of %q has tree size %d, below the earlier one's %d (Rekor rolled back, or answered from a replica behind)", log.Printable(cur.Origin), cur.Size, old.Size)
	}
	if old.Size == cur.Size && !bytes.Equal(old.Root, cur.Root) {
		return fmt.Errorf("Rekor fork: its checkpoint of %q at tree size %d has root %x, the earlier one of that size root %x",
			log.Printable(cur.Origin), cur.Size, cur.Root, old.Root)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, old.Size, cur.Size, c.Proof, old.Root, cur.Root); err != nil {
		return fmt.Errorf("Rekor fork: its checkpoint of %q at tree size %d (root %x) does not extend the earlier one at size %d (root %x): the consistency proof between them does not verify",
			log.Printable(cur.Origin), cur.Size, cur.Root, old.Size, old.Root)
	}
	return nil
}

// Checkpoint returns the Rekor checkpoint e's inclusion proof comes with,
// as stored: call it on an entry [Entry.Check] accepted. Two entries of
// one Rekor whose checkpoints have one origin and size and different
// roots show that Rekor presented two histories (a fork).
func (e *Entry) Checkpoint() (Checkpoint, error) {
	var le logEntry
	if err := json.Unmarshal(e.Entry, &le); err != nil {
		return Checkpoint{}, fmt.Errorf("entry does not parse: %w", err)
	}
	if _, err := checkShape(&le); err != nil {
		return Checkpoint{}, err
	}
	n := *le.Verification.InclusionProof.Checkpoint
	text, _, err := splitNote(n)
	if err != nil {
		return Checkpoint{}, err
	}
	cp, err := parseCheckpoint(text)
	cp.Note = n
	return cp, err
}

type noteSig struct {
	name string
	hint uint32
	sig  []byte
}

// splitNote splits a signed note (the text, a blank line, then lines
// "— NAME BASE64(hint ‖ signature)") into its text, newline included, and
// its signatures, of which there must be one at least.
func splitNote(n string) (string, []noteSig, error) {
	i := strings.LastIndex(n, "\n\n")
	if i < 0 || !strings.HasSuffix(n, "\n") {
		return "", nil, errors.New("checkpoint is not a signed note")
	}
	text, rest := n[:i+1], n[i+2:]
	var sigs []noteSig
	for _, line := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "\u2014" {
			return "", nil, fmt.Errorf("checkpoint signature line %q is not \"— NAME SIGNATURE\"", line)
		}
		b, err := base64.StdEncoding.DecodeString(f[2])
		if err != nil || len(b) < 5 {
			return "", nil, fmt.Errorf("checkpoint signature of %s is not base64 of a key hint and a signature", f[1])
		}
		sigs = append(sigs, noteSig{name: f[1], hint: binary.BigEndian.Uint32(b[:4]), sig: b[4:]})
	}
	if len(sigs) == 0 {
		return "", nil, errors.New("checkpoint has no signature")
	}
	return text, sigs, nil
}

// checkSET verifies the signed entry timestamp: key's signature over the
// RFC 8785 form of {body, integratedTime, logIndex, logID}.
func checkSET(le *logEntry, key crypto.PublicKey) error {
	payload, err := json.Marshal(struct {
		Body           any    `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	}{le.Body, *le.IntegratedTime, *le.LogIndex, *le.LogID})
	if err != nil {
		return err
	}
	canon, err := log.Canonicalize(payload)
	if err != nil {
		return err
	}
	return verifySignature(key, canon, le.Verification.SignedEntryTimestamp)
}

// verifySignature verifies sig over msg as Sigstore's verifiers do: ECDSA
// (ASN.1) and RSA (PKCS #1 v1.5) over the SHA-256 of msg, Ed25519 over msg.
func verifySignature(key crypto.PublicKey, msg, sig []byte) error {
	d := sha256.Sum256(msg)
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if !ecdsa.VerifyASN1(k, d[:], sig) {
			return errors.New("ECDSA signature does not verify")
		}
	case *rsa.PublicKey:
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, d[:], sig); err != nil {
			return err
		}
	case ed25519.PublicKey:
		if !ed25519.Verify(k, msg, sig) {
			return errors.New("Ed25519 signature does not verify")
		}
	default:
		return fmt.Errorf("unsupported Rekor key type %T", key)
	}
	return nil
}

// sameKey reports whether a and b are the same public key.
func sameKey(a, b crypto.PublicKey) bool {
	ad, err1 := x509.MarshalPKIXPublicKey(a)
	bd, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(ad, bd)
}
