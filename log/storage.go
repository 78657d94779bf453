package log

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/transparency-dev/merkle/compact"
)

// ErrNotFound is returned by [Storage] reads for an index, node, leaf hash or
// checkpoint size the store does not hold.
var ErrNotFound = errors.New("not found")

// Storage faults. A [Storage] wraps one of these into the errors of its
// failed commits and reads, and into what [Health.Err] returns, so that the
// sequencer, /healthz and /metrics can say what broke without knowing the
// backend. Each names the fault, not the remedy; the wrapping error says
// which file or key and what to do.
var (
	// ErrDiskFull: a write found no space left on the device.
	ErrDiskFull = errors.New("disk full")
	// ErrReadOnly: the store's file system (or the store) is read-only.
	ErrReadOnly = errors.New("read-only")
	// ErrIO: the device failed a read or a write (EIO and the like).
	ErrIO = errors.New("I/O error")
	// ErrCorrupt: stored data failed a checksum or contradicts itself.
	ErrCorrupt = errors.New("corrupt")
	// ErrLost: the store holds less than a checkpoint that left the
	// process (acknowledged entries are gone), or another tree than one;
	// serving on would sign a second history (a fork). See [LostError].
	ErrLost = errors.New("acknowledged entries lost")
)

// FileFault returns err, from doing op ("writing", "syncing", ...) on the
// file name, wrapped in the fault sentinel it is: ErrDiskFull for no space
// or quota, ErrReadOnly for a read-only file system or a refused
// permission, ErrIO otherwise. An error that already holds a sentinel is
// returned as it is. The one classification of a file's errors, for the
// stores and the small records beside them.
func FileFault(op, name string, err error) error {
	fault := ErrIO
	switch {
	case errors.Is(err, ErrDiskFull), errors.Is(err, ErrReadOnly), errors.Is(err, ErrIO), errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		fault = ErrDiskFull
	case errors.Is(err, syscall.EROFS), errors.Is(err, fs.ErrPermission):
		fault = ErrReadOnly
	}
	return fmt.Errorf("%w: %s %s: %w", fault, op, name, err)
}

// FaultReason names the storage fault err wraps, for health reports and
// metric labels: "disk full", "read-only", "I/O error", "corrupt",
// "acknowledged entries lost", or "" if it wraps none of them.
func FaultReason(err error) string {
	for _, f := range []error{ErrLost, ErrCorrupt, ErrDiskFull, ErrReadOnly, ErrIO} {
		if errors.Is(err, f) {
			return f.Error()
		}
	}
	return ""
}

// Health is implemented by a [Storage] that can stop accepting commits on
// its own, not only by failing one: a background write that found the disk
// full, a read that met corruption, a store opened read-only. Err returns
// why the store refuses commits, or nil while it accepts them. Reads of
// what is durable go on after Err becomes non-nil.
type Health interface {
	Err() error
}

// LostError says that a store no longer holds a checkpoint that left the
// process: the tree on disk is smaller than it (Size > HeldSize), or has
// another root at its size. Source names where the checkpoint was found
// (the store's published-checkpoint record, an anchor record, the
// witnesses' cosigned checkpoint).
type LostError struct {
	Source   string
	Size     uint64 // the checkpoint that left the process
	Root     []byte
	HeldSize uint64 // what the store holds
	HeldRoot []byte // its root at min(Size, HeldSize)
}

func (e *LostError) Error() string {
	what := fmt.Sprintf("the store holds %d entries (root %x), but %s says a checkpoint of size %d (root %x) left the process", e.HeldSize, e.HeldRoot, e.Source, e.Size, e.Root)
	if e.HeldSize >= e.Size {
		what = fmt.Sprintf("the store's tree at size %d has root %x, but %s says the checkpoint of that size handed out had root %x", e.Size, e.HeldRoot, e.Source, e.Root)
	}
	return ErrLost.Error() + ": " + what + "; serving on would sign a second history (a fork), which is fatal to a transparency log: " +
		"keep this data dir untouched as evidence, and start a new log with a new origin in a new data dir (provlog keygen --origin NEW --data NEWDIR)"
}

func (e *LostError) Unwrap() error { return ErrLost }

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
// memory) and must pass logtest.TestStorage. A store that can fail on its
// own also implements [Health]. Reads that meet corruption fail with an
// error wrapping [ErrCorrupt].
type Storage interface {
	// Commit writes b atomically and durably: when it returns nil, all of b
	// survives a crash of the process or the machine, and a store that
	// later finds b gone (a lost write-ahead log tail) fails to open with
	// a [LostError] rather than serve a shorter tree. A refused batch (see
	// below) writes nothing. Any other error leaves the outcome unknown (the
	// disk may hold the batch): the store then refuses further commits, and
	// after reopening it holds either all of b or none of it, never a part.
	// The sequencer stops at such an error for that reason. b.Start must equal the
	// size of the last committed state, and b.State.Size must equal
	// b.Start+len(b.Entries), and b must pass [Batch.Check]; otherwise
	// Commit refuses the batch and writes nothing.
	// Commit must not keep references to b's slices after it returns.
	// Errors from a faulty disk wrap [ErrDiskFull], [ErrReadOnly], [ErrIO]
	// or [ErrCorrupt]. Commit never panics on a storage fault.
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
