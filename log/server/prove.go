package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
)

// An InclusionRequest names the entry a receipt is for and the tree it
// is proven in.
type InclusionRequest struct {
	// Index is the entry's index, unless LeafHash is set: then the entry
	// is the one with that leaf hash.
	Index    uint64
	LeafHash []byte
	// AtSize proves the entry in the tree of size Size, on the checkpoint
	// signed at that size (none past the latest); otherwise on the latest
	// checkpoint.
	AtSize bool
	Size   uint64
	// Cosigned, unless AtSize, is a cosigned checkpoint note (nil: none)
	// to prove on instead of the latest, when it covers the entry and is
	// the log's own checkpoint of its size with cosignatures added, so the
	// receipt also convinces those who trust the witnesses.
	Cosigned []byte
}

// ProveInclusion returns the c2sp.org/tlog-proof receipt for the entry
// req names, read from s; size and checkpoint are the log's latest signed
// checkpoint. It is the one way provlog builds a receipt for an entry
// already in the log: the HTTP API, `provlog prove` and the proxy's
// provlog__prove tool all come here. When the entry or the checkpoint is
// not there, the error says which and wraps [log.ErrNotFound].
func ProveInclusion(ctx context.Context, s log.Storage, size uint64, checkpoint []byte, req InclusionRequest) (*log.Receipt, error) {
	if req.AtSize {
		// A checkpoint past the latest is not handed out, though the
		// store may hold it: one this sequencer has not shown yet, or
		// another writer's on a shared log.
		cp, err := []byte(nil), error(log.ErrNotFound)
		if req.Size <= size {
			cp, err = s.Checkpoint(ctx, req.Size)
		}
		if errors.Is(err, log.ErrNotFound) {
			return nil, notFoundf("no checkpoint was signed at size %d (the log's size is %d); ask for a size from a checkpoint you hold, or leave the size out for the latest", req.Size, size)
		}
		if err != nil {
			return nil, fmt.Errorf("reading checkpoint %d: %w", req.Size, err)
		}
		size, checkpoint = req.Size, cp
	}
	index, leafHash := req.Index, req.LeafHash
	if leafHash != nil {
		var err error
		index, err = s.LeafIndex(ctx, leafHash)
		if errors.Is(err, log.ErrNotFound) {
			return nil, notFoundf("no entry has leaf hash %x", leafHash)
		}
		if err != nil {
			return nil, fmt.Errorf("looking up leaf hash: %w", err)
		}
	}
	if index >= size {
		return nil, notFoundf("entry %d is not in the tree of size %d", index, size)
	}
	if !req.AtSize && req.Cosigned != nil {
		if c, err := log.ParseCheckpointNote(req.Cosigned); err == nil && index < c.Size {
			if own, err := s.Checkpoint(ctx, c.Size); err == nil && bytes.HasPrefix(req.Cosigned, own) {
				size, checkpoint = c.Size, req.Cosigned
			}
		}
	}
	if leafHash == nil {
		h, err := s.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(0, index)})
		if err != nil {
			return nil, fmt.Errorf("reading leaf hash %d: %w", index, err)
		}
		leafHash = h[0]
	}
	return log.ProveReceipt(ctx, s, index, size, leafHash, checkpoint)
}

// Prove is [ProveInclusion] on the latest checkpoint this sequencer has
// shown (never the store's own, which on a shared log may be another
// writer's, not recorded here as handed out), for the log API and the
// sidecar's provlog__prove tool alike. On a shared log, a size or an
// entry past the latest here may be in the store's newest state: it is
// looked for there first ([Sequencer.CatchUp]), so that a receipt another
// sidecar just handed out can be proven here too.
func (s *Sequencer) Prove(ctx context.Context, store log.Storage, req InclusionRequest) (*log.Receipt, error) {
	size, cp := s.Checkpoint()
	switch {
	case req.AtSize:
		size, cp = s.CatchUp(ctx, req.Size)
	case req.LeafHash == nil && req.Index < math.MaxUint64:
		size, cp = s.CatchUp(ctx, req.Index+1)
	}
	rc, err := ProveInclusion(ctx, store, size, cp, req)
	if errors.Is(err, log.ErrNotFound) && req.LeafHash != nil && !req.AtSize {
		// The entry of that leaf hash may be past the latest here.
		if i, lerr := store.LeafIndex(ctx, req.LeafHash); lerr == nil && i >= size && i < math.MaxUint64 {
			if n, c := s.CatchUp(ctx, i+1); n > size {
				rc, err = ProveInclusion(ctx, store, n, c, req)
			}
		}
	}
	return rc, err
}

// ProveLatest is [ProveInclusion] on the latest checkpoint s holds, for
// a log read without its sequencer (a command on a data dir, a tool
// beside a running one).
func ProveLatest(ctx context.Context, s log.Storage, req InclusionRequest) (*log.Receipt, error) {
	st, err := s.State(ctx)
	if err != nil {
		return nil, err
	}
	return ProveInclusion(ctx, s, st.Size, st.Checkpoint, req)
}

// notFound is an error that says what is not there and wraps
// [log.ErrNotFound] without repeating its text.
type notFound struct{ msg string }

func notFoundf(format string, args ...any) error { return notFound{fmt.Sprintf(format, args...)} }

func (e notFound) Error() string { return e.msg }
func (e notFound) Unwrap() error { return log.ErrNotFound }
