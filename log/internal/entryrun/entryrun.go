// Package entryrun holds what the log stores share in answering
// [log.Storage.Entries] (the check of the range asked for, and the check
// that the entries a store read, in index order, are the whole range) and
// [log.Storage.Checkpoint] (which sizes have one, and the errors).
package entryrun

import (
	"fmt"

	"github.com/provlog/provlog/log"
)

// Check returns nil if [start, end) is a range of entries of a log of
// size, and otherwise the error, wrapping [log.ErrNotFound], that Entries
// returns for it.
func Check(start, end, size uint64) error {
	if start > end || end > size {
		return fmt.Errorf("entries [%d, %d) of a log of size %d: %w", start, end, size, log.ErrNotFound)
	}
	return nil
}

// A Run gathers the entries [start, end) of a log as a store reads them,
// in index order.
type Run struct {
	start, end, size uint64
	corrupt          error
	entries          [][]byte
}

// New returns an empty run of [start, end) in a log of size, a range
// [Check] passed. corrupt is the store's sentinel for corrupt data, which
// the run's errors wrap.
func New(start, end, size uint64, corrupt error) *Run {
	return &Run{start: start, end: end, size: size, corrupt: corrupt, entries: make([][]byte, 0, end-start)}
}

// Next returns the index of the entry the run needs next.
func (r *Run) Next() uint64 { return r.start + uint64(len(r.entries)) }

// Missing returns the error of the run's next entry not being in the store.
func (r *Run) Missing() error {
	return fmt.Errorf("%w: entry %d of a log of size %d is missing", r.corrupt, r.Next(), r.size)
}

// Add adds e, read as the entry at index. If index is not [Run.Next],
// the store lacks the next entry: Add returns [Run.Missing] and adds
// nothing.
func (r *Run) Add(index uint64, e []byte) error {
	if index != r.Next() {
		return r.Missing()
	}
	r.entries = append(r.entries, e)
	return nil
}

// Entries returns the run's entries, or [Run.Missing] if the store held
// fewer than the range.
func (r *Run) Entries() ([][]byte, error) {
	if uint64(len(r.entries)) != r.end-r.start {
		return nil, r.Missing()
	}
	return r.entries, nil
}
