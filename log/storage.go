package log

import (
	"context"
	"errors"

	"github.com/transparency-dev/merkle/compact"
)

// ErrNotFound is returned by [Storage] reads for an index, node, leaf hash or
// checkpoint size the store does not hold.
var ErrNotFound = errors.New("not found")

// A Node is one perfect subtree hash: level 0 nodes are leaf hashes, and the
// node (L, I) covers leaves [I<<L, (I+1)<<L), as in compact.NodeID.
type Node struct {
	ID   compact.NodeID
	Hash []byte
}

// State is the tree state a [Storage] keeps beside the entries: the size,
// the compact range over [0, Size) (the roots of its perfect subtrees, left
// to right, as compact.Range.Hashes returns them) and the signed checkpoint
// note for that size.
type State struct {
	Size       uint64
	Range      [][]byte
	Checkpoint []byte
}

// A Batch is what the sequencer commits at once: the entries at indices
// [Start, Start+len(Entries)), their leaf hashes, every perfect node that
// appending them completed (leaves included), and the state after them.
type Batch struct {
	Start      uint64
	Entries    [][]byte
	LeafHashes [][]byte
	Nodes      []Node
	State      State
}

// Storage keeps one log: entries, tree nodes, a leaf-hash index and the
// history of signed checkpoints. One sequencer writes it; any number of
// goroutines read it concurrently.
//
// Implementations live in other packages (logpebble on disk, logtest in
// memory) and must pass logtest.TestStorage.
type Storage interface {
	// Commit writes b atomically and durably: when it returns nil, all of b
	// survives a crash of the process or the machine. A refused batch (see
	// below) writes nothing. Any other error leaves the outcome unknown (the
	// disk may hold the batch): the store then refuses further commits, and
	// after reopening it holds either all of b or none of it, never a part.
	// The sequencer stops at such an error for that reason. b.Start must equal the
	// size of the last committed state, and b.State.Size must equal
	// b.Start+len(b.Entries), and b must pass [Batch.Check]; otherwise
	// Commit refuses the batch and writes nothing.
	// Commit must not keep references to b's slices after it returns.
	Commit(ctx context.Context, b *Batch) error

	// State returns the last committed state, or the zero State for a store
	// that has never committed.
	State(ctx context.Context) (State, error)

	// Entries returns the entries at indices [start, end). It returns
	// ErrNotFound if end exceeds the committed size or start > end.
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)

	// ReadNodes returns the hashes of the given perfect nodes, in order. It
	// returns ErrNotFound if any of them has not been committed.
	ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error)

	// LeafIndex returns the index of an entry with this leaf hash. If the
	// same leaf hash was appended more than once, any of its indices may be
	// returned. It returns ErrNotFound if no committed entry has it.
	LeafIndex(ctx context.Context, leafHash []byte) (uint64, error)

	// Checkpoint returns the signed checkpoint note committed with the state
	// of exactly this size, or ErrNotFound if no batch ended at this size.
	Checkpoint(ctx context.Context, size uint64) ([]byte, error)

	// Checkpoints calls fn for every committed checkpoint with size >= from,
	// in increasing order of size, and stops at the first error fn returns.
	Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error

	// Close releases the store. Reads and commits after Close fail.
	Close() error
}

// NodeReader reads stored perfect nodes; [Storage] is one.
type NodeReader interface {
	ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error)
}
