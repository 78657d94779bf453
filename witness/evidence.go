package witness

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// Kinds of [Evidence].
const (
	// EvidenceFork is conclusive: two checkpoints signed by the log's key
	// that no append-only log could have signed.
	EvidenceFork = "fork"
	// EvidenceRollback records a log that served a checkpoint smaller
	// than one it signed before and no longer serves the tree of the
	// larger one, so consistency cannot be checked. The two notes alone do
	// not prove a fork.
	EvidenceRollback = "rollback"
)

// Evidence records two signed checkpoints of one log that cannot both be
// true. It is written as JSON; anyone holding the log's verifier key can
// check a fork with [Evidence.Verify], using nothing but the evidence.
//
// For checkpoints of equal size, differing root hashes are the proof. For
// different sizes, RootAtSmallerSize is the root hash the larger tree has at
// the smaller size, and Proof is the RFC 6962 consistency proof from the
// smaller size to the larger that leads from RootAtSmallerSize to the
// larger checkpoint's root: the larger checkpoint commits to
// RootAtSmallerSize, so a smaller checkpoint with another root is a fork.
// (The same proof fails from the smaller checkpoint's root.)
type Evidence struct {
	Kind   string `json:"kind"`
	Origin string `json:"origin"`
	// Checkpoints are the two signed notes verbatim: the smaller size
	// first; for equal sizes, the one seen first.
	Checkpoints       [2]string `json:"checkpoints"`
	RootAtSmallerSize string    `json:"root_at_smaller_size,omitempty"` // base64
	Proof             []string  `json:"proof,omitempty"`                // base64 hashes
	Found             time.Time `json:"found"`
	Detail            string    `json:"detail"`
}

// Marshal returns the evidence as indented JSON.
func (e *Evidence) Marshal() []byte {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		panic(err) // strings and a time only
	}
	return append(b, '\n')
}

// ParseEvidence parses evidence as [Evidence.Marshal] writes it.
func ParseEvidence(b []byte) (*Evidence, error) {
	var e Evidence
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("parsing evidence: %w", err)
	}
	return &e, nil
}

// Verify checks that the evidence proves a fork of the log whose verifier
// keys are vs (one, or each a log that rotated its key has used): both
// checkpoints are signed by one of vs and of the evidence's origin,
// and either their sizes are equal and their roots differ, or the proof
// leads from RootAtSmallerSize to the larger root and RootAtSmallerSize is
// not the smaller checkpoint's root. It returns nil only for conclusive
// evidence. The origin need not be v's name: c2sp.org/signed-note does
// not tie them, and `provlog-witness check --origin` follows such logs.
func (e *Evidence) Verify(vs ...note.Verifier) error {
	if e.Origin == "" {
		return errors.New("evidence: no origin")
	}
	if len(vs) == 0 {
		return errors.New("evidence: no verifier key")
	}
	var cs [2]log.Checkpoint
	for i, msg := range e.Checkpoints {
		c, err := openCheckpoint([]byte(msg), note.VerifierList(vs...), e.Origin)
		if err != nil {
			return fmt.Errorf("evidence: checkpoint %d: %w", i+1, err)
		}
		cs[i] = c
	}
	small, large := cs[0], cs[1]
	if small.Size > large.Size {
		return errors.New("evidence: the first checkpoint is the larger")
	}
	if small.Size == large.Size {
		if bytes.Equal(small.Hash, large.Hash) {
			return errors.New("evidence: the two checkpoints agree")
		}
		return nil
	}
	r, err := base64.StdEncoding.DecodeString(e.RootAtSmallerSize)
	if err != nil || len(r) != log.HashSize {
		return errors.New("evidence: no root hash at the smaller size")
	}
	if bytes.Equal(r, small.Hash) {
		return errors.New("evidence: the larger tree's root at the smaller size is the smaller checkpoint's root: no fork shown")
	}
	p := make([][]byte, len(e.Proof))
	for i, s := range e.Proof {
		if p[i], err = base64.StdEncoding.DecodeString(s); err != nil || len(p[i]) != log.HashSize {
			return fmt.Errorf("evidence: proof line %d is not a base64 hash", i+1)
		}
	}
	if err := log.VerifyConsistency(small.Size, large.Size, p, r, large.Hash); err != nil {
		return fmt.Errorf("evidence: the proof does not tie the root at size %d to the checkpoint of size %d: %w", small.Size, large.Size, err)
	}
	return nil
}

// openCheckpoint verifies a signed checkpoint note with vs, as strictly as
// log.OpenCheckpoint does, and parses it; its origin must be origin.
func openCheckpoint(msg []byte, vs note.Verifiers, origin string) (log.Checkpoint, error) {
	n, err := log.OpenNote(msg, vs)
	if err != nil {
		return log.Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	c, err := log.ParseCheckpoint(n.Text)
	if err != nil {
		return log.Checkpoint{}, err
	}
	if c.Origin != origin {
		return log.Checkpoint{}, fmt.Errorf("checkpoint: origin %q is not the evidence's %q", c.Origin, origin)
	}
	return c, nil
}

// ForkFromProof returns fork evidence from two checkpoints (signed notes
// the caller verified) and an RFC 6962 consistency proof between them that
// failed to verify, if the proof itself shows a fork: the sizes are equal
// and the roots differ, or the proof rebuilds the larger root but another
// root at the smaller size. A wrong proof shows nothing, and neither does
// one from a power-of-two size (it does not carry the subtree root, so a
// wrong proof and a fork look alike); then it returns nil.
func ForkFromProof(smaller, larger []byte, proof [][]byte) *Evidence {
	cs, err := log.ParseCheckpointNote(smaller)
	if err != nil {
		return nil
	}
	cl, err := log.ParseCheckpointNote(larger)
	if err != nil || cs.Origin != cl.Origin || cs.Size > cl.Size {
		return nil
	}
	e := &Evidence{
		Kind:        EvidenceFork,
		Origin:      cs.Origin,
		Checkpoints: [2]string{string(smaller), string(larger)},
		Found:       time.Now().UTC().Truncate(time.Second),
	}
	if cs.Size == cl.Size {
		if bytes.Equal(cs.Hash, cl.Hash) {
			return nil
		}
		e.Detail = fmt.Sprintf("two checkpoints of size %d with different root hashes", cs.Size)
		return e
	}
	oldRoot, newRoot, ok := consistencyRoots(cs.Size, cl.Size, proof)
	if !ok || !bytes.Equal(newRoot, cl.Hash) || bytes.Equal(oldRoot, cs.Hash) {
		return nil
	}
	e.RootAtSmallerSize = base64.StdEncoding.EncodeToString(oldRoot)
	for _, h := range proof {
		e.Proof = append(e.Proof, base64.StdEncoding.EncodeToString(h))
	}
	e.Detail = fmt.Sprintf("the checkpoint of size %d commits to root %s at size %d, but the log also signed root %s at that size",
		cl.Size, e.RootAtSmallerSize, cs.Size, base64.StdEncoding.EncodeToString(cs.Hash))
	return e
}

// consistencyRoots computes the two root hashes an RFC 6962 consistency
// proof from size old to size new leads to (RFC 9162, section 2.1.4.2).
// It reports false when old is 0 or a power of two (the proof then omits
// the old root, which must come from elsewhere), when old >= new, or when
// the proof has the wrong length.
func consistencyRoots(old, new uint64, proof [][]byte) (oldRoot, newRoot []byte, ok bool) {
	if old == 0 || old >= new || old&(old-1) == 0 || len(proof) == 0 {
		return nil, nil, false
	}
	fn, sn := old-1, new-1
	// Skip the levels where the old tree's right edge is a left child.
	shift := bits.TrailingZeros64(^fn)
	fn >>= shift
	sn >>= shift
	fr, sr := proof[0], proof[0]
	for _, c := range proof[1:] {
		if sn == 0 {
			return nil, nil, false
		}
		if fn&1 == 1 || fn == sn {
			fr = log.NodeHash(c, fr)
			sr = log.NodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = log.NodeHash(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return nil, nil, false
	}
	return fr, sr, true
}
