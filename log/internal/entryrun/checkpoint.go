package entryrun

import (
	"fmt"

	"github.com/provlog/provlog/log"
)

// Checkpoint answers [log.Storage.Checkpoint] for size in a log of size
// have: the note read finds, or an error wrapping [log.ErrNotFound] for a
// size outside [1, have] (read is not called) or a note read does not find
// (ok false). An error from read is wrapped, naming the size.
func Checkpoint(size, have uint64, read func() (note []byte, ok bool, err error)) ([]byte, error) {
	if size == 0 || size > have {
		return nil, fmt.Errorf("checkpoint for size %d: %w", size, log.ErrNotFound)
	}
	note, ok, err := read()
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading checkpoint for size %d: %w", size, err)
	case !ok:
		return nil, fmt.Errorf("checkpoint for size %d: %w", size, log.ErrNotFound)
	}
	return note, nil
}
