// Package client is the log's side of c2sp.org/tlog-witness@v1.0.0: it
// submits the log's checkpoints to witnesses with consistency proofs and
// collects their cosignatures.
//
// A [Witness] is one witness: it remembers the size the witness last
// cosigned, builds the consistency proof from that size out of the log's
// stored nodes, learns the witness's size from a 409 and retries. A
// witness refusal that means it has seen another history of the log is a
// [*ConflictError].
//
// A [Cosigner] runs a k-of-n policy over several witnesses: it takes the
// log's new checkpoints as they come ([Cosigner.Submit]), coalesces them
// (at most one per interval), asks every witness in parallel, each on its
// own, and keeps the newest checkpoint at least k of them cosigned
// ([Cosigner.Latest]), with their cosignatures added to the note, as soon
// as the k-th answers: a slow witness's cosignature is added when it
// comes.
package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// A Witness submits a log's checkpoints to one witness.
type Witness struct {
	api   witness.AddCheckpointer
	v     note.Verifier
	nodes Tree

	mu   sync.Mutex // one request at a time
	size uint64     // the size the witness last cosigned, as far as we know
}

// A Tree is what a [Witness] reads of the log's store ([log.Storage] is
// one): its nodes, from which consistency proofs are built, and its signed
// checkpoints, which show a witness that is ahead holds the log's tree.
type Tree interface {
	log.NodeReader
	Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error
}

// NewWitness returns a client for the witness reached through api, whose
// cosignatures verify with v; nodes is the log's store.
func NewWitness(api witness.AddCheckpointer, v note.Verifier, nodes Tree) *Witness {
	return &Witness{api: api, v: v, nodes: nodes}
}

// Name returns the witness's key name.
func (w *Witness) Name() string { return w.v.Name() }

// Size returns the size of the checkpoint the witness last cosigned, as far
// as w knows (0 until the first answer).
func (w *Witness) Size() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// A ConflictError is a witness refusal that means the witness holds a
// history of the log other than ours: it cosigned a larger tree than the
// log has, it refused our consistency proof from its own size (so its tree
// at that size differs), or it holds another root at our size.
type ConflictError struct {
	Witness     string // the witness's key name
	Size        uint64 // the size of the checkpoint we submitted
	WitnessSize uint64 // the size the witness says it cosigned
	Status      int    // the witness's HTTP status (409 or 422)
	Detail      string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness %s holds another history of the log: %s", e.Witness, e.Detail)
}

// A BehindError says the witness already cosigned a larger tree of the
// log than the checkpoint submitted, a tree the log's store holds, and
// then cosigned the log's own checkpoint of that size (or a larger one,
// with a consistency proof from it), so its tree is the log's: the
// checkpoint was stale (another sidecar of a shared log got a newer one
// cosigned first), not a sign of another history. The next checkpoint,
// at least WitnessSize, is submitted from there.
type BehindError struct {
	Witness     string // the witness's key name
	Size        uint64 // the size of the checkpoint we submitted
	WitnessSize uint64 // the size the witness says it cosigned
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("witness %s already cosigned size %d of the log, which the log's tree holds; the checkpoint of size %d was stale, a newer one is awaited", e.Witness, e.WitnessSize, e.Size)
}

// maxAttempts bounds the requests for one checkpoint: the first, and
// retries after 409s that named another size.
const maxAttempts = 4

// Cosign submits the signed checkpoint note to the witness and returns the
// witness's verified cosignature lines for it. It starts from the size the
// witness last cosigned as far as w knows, and moves to the size a 409
// names. A refusal that shows a different history is a [*ConflictError];
// a witness that cosigned a larger tree the log's store holds gives a
// [*BehindError]; other refusals are [*witness.Error]s.
func (w *Witness) Cosign(ctx context.Context, signed []byte) ([]byte, error) {
	c, err := log.ParseCheckpointNote(signed)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	conflict := func(status int, witnessSize uint64, format string, args ...any) error {
		return &ConflictError{Witness: w.v.Name(), Size: c.Size, WitnessSize: witnessSize, Status: status, Detail: fmt.Sprintf(format, args...)}
	}
	// ahead is the answer for a witness that cosigned size n, above the
	// checkpoint's: on a shared log another sidecar may have had a larger
	// tree cosigned while ours was on its way, and then our own store
	// holds the tree of size n. The size alone shows nothing of the
	// witness's root there: confirmAhead asks the witness to take the
	// log's own checkpoint from its size on.
	ahead := func(status int, n uint64) error {
		if c.Size > 0 {
			if _, err := log.ProveConsistency(ctx, w.nodes, c.Size, n); err == nil {
				return w.confirmAhead(ctx, c.Size, n, conflict)
			}
		}
		return conflict(status, n, "it cosigned size %d, larger than the log's checkpoint of size %d", n, c.Size)
	}
	start := time.Now()
	old := w.size
	for range maxAttempts {
		if old > c.Size {
			return nil, ahead(http.StatusConflict, old)
		}
		req := &witness.AddCheckpointRequest{OldSize: old, Proof: [][]byte{}, Checkpoint: signed}
		if old > 0 && old < c.Size {
			if req.Proof, err = log.ProveConsistency(ctx, w.nodes, old, c.Size); err != nil {
				return nil, fmt.Errorf("witness %s: %w", w.v.Name(), err)
			}
		}
		sigs, err := w.api.AddCheckpoint(ctx, req)
		if err == nil {
			lines, err := w.verify(signed, sigs, start)
			if err != nil {
				return nil, err
			}
			w.size = c.Size
			return lines, nil
		}
		var we *witness.Error
		if !errors.As(err, &we) {
			return nil, fmt.Errorf("witness %s: %w", w.v.Name(), err)
		}
		switch we.Status {
		case http.StatusConflict:
			switch {
			case we.Size > maxTreeSize:
				// No log is that large, and an entry could not hold the
				// number exactly (JSON numbers are doubles).
				return nil, fmt.Errorf("witness %s: 409 naming size %d, beyond any log's (2^53); its answer is refused", w.v.Name(), we.Size)
			case we.Size == old && old == c.Size:
				return nil, conflict(we.Status, we.Size, "it cosigned another root hash at size %d", old)
			case we.Size == old:
				return nil, fmt.Errorf("witness %s: 409 naming the old size %d we sent", w.v.Name(), old)
			case we.Size > c.Size:
				return nil, ahead(we.Status, we.Size)
			}
			old = we.Size
			w.size = we.Size
			continue
		case http.StatusUnprocessableEntity:
			if old > 0 {
				return nil, conflict(we.Status, old, "it refused the log's consistency proof from size %d to %d, so its tree at size %d differs (%s)", old, c.Size, old, we.Msg)
			}
		}
		return nil, fmt.Errorf("witness %s: %w", w.v.Name(), err)
	}
	return nil, fmt.Errorf("witness %s: its size kept changing; gave up after %d requests", w.v.Name(), maxAttempts)
}

// confirmAhead shows that the witness's checkpoint of size n, above the
// submitted size, is the log's: it submits the log's first stored
// checkpoint of size n or more, with the consistency proof from n, and the
// witness cosigns it only if its own root at size n is the log's (the
// same root for a checkpoint of size n, a proof that verifies from its
// root for a larger one). Then the answer is a [*BehindError] and the
// witness's size is known; a refusal that shows another root at n is a
// [*ConflictError] (made by conflict).
func (w *Witness) confirmAhead(ctx context.Context, submitted, n uint64, conflict func(int, uint64, string, ...any) error) error {
	for range maxAttempts {
		if _, err := log.ProveConsistency(ctx, w.nodes, submitted, n); err != nil {
			return conflict(http.StatusConflict, n, "it cosigned size %d, larger than the log's checkpoint of size %d", n, submitted)
		}
		m, cp, err := w.checkpointFrom(ctx, n)
		if err != nil {
			return fmt.Errorf("witness %s: reading the log's checkpoint of size %d or more: %w", w.v.Name(), n, err)
		}
		if cp == nil {
			return conflict(http.StatusConflict, n, "it cosigned size %d, and the log signed no checkpoint of that size or larger", n)
		}
		req := &witness.AddCheckpointRequest{OldSize: n, Proof: [][]byte{}, Checkpoint: cp}
		if m > n {
			if req.Proof, err = log.ProveConsistency(ctx, w.nodes, n, m); err != nil {
				return fmt.Errorf("witness %s: %w", w.v.Name(), err)
			}
		}
		start := time.Now()
		sigs, err := w.api.AddCheckpoint(ctx, req)
		if err == nil {
			if _, err := w.verify(cp, sigs, start); err != nil {
				return err
			}
			w.size = m
			return &BehindError{Witness: w.v.Name(), Size: submitted, WitnessSize: m}
		}
		var we *witness.Error
		switch {
		case !errors.As(err, &we):
		case we.Status == http.StatusConflict && we.Size == n && m == n:
			return conflict(we.Status, n, "it cosigned another root hash at size %d than the log's checkpoint of that size", n)
		case we.Status == http.StatusUnprocessableEntity:
			return conflict(we.Status, n, "it refused the log's consistency proof from its size %d to %d, so its tree at size %d differs (%s)", n, m, n, we.Msg)
		case we.Status == http.StatusConflict && we.Size > n && we.Size <= maxTreeSize:
			n = we.Size // it moved on meanwhile
			continue
		}
		return fmt.Errorf("witness %s: showing it the log's checkpoint of size %d: %w", w.v.Name(), m, err)
	}
	return fmt.Errorf("witness %s: its size kept changing; gave up after %d requests", w.v.Name(), maxAttempts)
}

// checkpointFrom returns the log's first stored signed checkpoint of size
// n or more, or a nil note if there is none.
func (w *Witness) checkpointFrom(ctx context.Context, n uint64) (uint64, []byte, error) {
	var (
		size uint64
		cp   []byte
	)
	errFound := errors.New("found")
	err := w.nodes.Checkpoints(ctx, n, func(s uint64, note []byte) error {
		size, cp = s, bytes.Clone(note)
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return 0, nil, err
	}
	return size, cp, nil
}

// maxTreeSize is the largest log size a witness may name: what a JSON
// number (an IEEE double) holds exactly.
const maxTreeSize = 1<<53 - 1

// MaxClockSkew is how far a witness's clock may be from ours: a
// cosignature/v1 timestamp says when the witness cosigned, which is when
// it was asked, so one dated later than now or earlier than the request
// by more than this is refused. A cosignature dated before the checkpoint
// was submitted vouches for a time the log's tree may not have existed;
// one dated ahead makes the checkpoint look witnessed later than it was.
const MaxClockSkew = 10 * time.Minute

// verify checks the witness's answer to signed, sent at start, and
// returns its cosignature line, ignoring lines by other keys as the spec
// asks. It opens the line as every verifier of the log's checkpoints will
// (log.OpenNote): an answer with two lines by the witness's key, or one
// spelled otherwise than canonically, is refused, so the Cosigner never
// hands out a line that does not verify on its own; and its timestamp
// must be within [MaxClockSkew] of the time from start to now.
func (w *Witness) verify(signed, sigs []byte, start time.Time) ([]byte, error) {
	lines, err := witness.SignatureLines(sigs)
	if err != nil {
		return nil, fmt.Errorf("witness %s: malformed response: %w", w.v.Name(), err)
	}
	var mine []byte
	for _, l := range lines {
		if isSignatureBy(l, w.v) {
			mine = append(mine, l...)
		}
	}
	if mine == nil {
		return nil, fmt.Errorf("witness %s: the response has no cosignature by its key (key ID %08x)", w.v.Name(), w.v.KeyHash())
	}
	n, err := log.OpenNote(append(bytes.Clone(signed), mine...), note.VerifierList(w.v))
	if err != nil {
		return nil, fmt.Errorf("witness %s: its cosignature does not verify: %w", w.v.Name(), err)
	}
	for _, sig := range n.Sigs {
		t, err := log.CosignatureTime(sig)
		if err != nil {
			return nil, fmt.Errorf("witness %s: %w", w.v.Name(), err)
		}
		now := time.Now()
		switch {
		case t.After(now.Add(MaxClockSkew)):
			return nil, fmt.Errorf("witness %s: its cosignature is dated %s, %s ahead of this machine's clock (at most %s is allowed)",
				w.v.Name(), t.Format(time.RFC3339), t.Sub(now).Round(time.Second), MaxClockSkew)
		case t.Before(start.Add(-MaxClockSkew)):
			return nil, fmt.Errorf("witness %s: its cosignature is dated %s, %s before the checkpoint was submitted (at most %s is allowed)",
				w.v.Name(), t.Format(time.RFC3339), start.Sub(t).Round(time.Second), MaxClockSkew)
		}
	}
	return mine, nil
}

// isSignatureBy reports whether a signature line is by v's name and key ID.
func isSignatureBy(line string, v note.Verifier) bool {
	prefix := "— " + v.Name() + " "
	if len(line) <= len(prefix) || line[:len(prefix)] != prefix {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(line[len(prefix) : len(line)-1])
	return err == nil && len(sig) >= 4 && binary.BigEndian.Uint32(sig) == v.KeyHash()
}

// ConflictEntry returns the witness.conflict log entry recording c: the
// witness, the sizes, its answer and the checkpoint it refused.
func ConflictEntry(c *ConflictError, checkpoint []byte, t time.Time) ([]byte, error) {
	e := &witness.ConflictEntry{Time: t, Witness: c.Witness, Status: c.Status, CheckpointSize: c.Size,
		WitnessSize: c.WitnessSize, Detail: c.Detail, Checkpoint: string(checkpoint)}
	return e.Marshal()
}
