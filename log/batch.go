package log

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
)

// Check reports why b cannot follow a log of the given size, or nil: it
// must hold at least one entry, start at size, end at its state's size,
// carry one 32-byte leaf hash per entry and a compact range of the right
// length for the new size, and its nodes must be perfect nodes the batch
// completes (level 0 nodes equal to their leaf hashes). Every [Storage]
// refuses, writing nothing, a batch that fails Check.
func (b *Batch) Check(size uint64) error {
	if b == nil {
		return errors.New("nil batch")
	}
	n := uint64(len(b.Entries))
	switch {
	case n == 0:
		return errors.New("batch has no entries")
	case b.Start != size:
		return fmt.Errorf("batch starts at %d, log size is %d", b.Start, size)
	case b.State.Size != b.Start+n || b.State.Size < n:
		return fmt.Errorf("batch of %d entries at %d ends at %d, state says size %d", n, b.Start, b.Start+n, b.State.Size)
	case len(b.LeafHashes) != len(b.Entries):
		return fmt.Errorf("batch has %d entries and %d leaf hashes", n, len(b.LeafHashes))
	case len(b.State.Range) != bits.OnesCount64(b.State.Size):
		return fmt.Errorf("compact range for size %d has %d hashes, want %d", b.State.Size, len(b.State.Range), bits.OnesCount64(b.State.Size))
	}
	for i, h := range b.LeafHashes {
		if len(h) != HashSize {
			return fmt.Errorf("leaf hash %d is %d bytes, want %d", b.Start+uint64(i), len(h), HashSize)
		}
	}
	for i, h := range b.State.Range {
		if len(h) != HashSize {
			return fmt.Errorf("compact range hash %d is %d bytes, want %d", i, len(h), HashSize)
		}
	}
	for _, nd := range b.Nodes {
		id := nd.ID
		if len(nd.Hash) != HashSize {
			return fmt.Errorf("node (%d, %d) hash is %d bytes, want %d", id.Level, id.Index, len(nd.Hash), HashSize)
		}
		if id.Level >= 64 || id.Index >= b.State.Size>>id.Level || (id.Index+1)<<id.Level <= b.Start {
			return fmt.Errorf("node (%d, %d) is not completed by batch [%d, %d)", id.Level, id.Index, b.Start, b.State.Size)
		}
		if id.Level == 0 && !bytes.Equal(nd.Hash, b.LeafHashes[id.Index-b.Start]) {
			return fmt.Errorf("node (0, %d) differs from the leaf hash", id.Index)
		}
	}
	return nil
}
