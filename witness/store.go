package witness

import (
	"context"
	"errors"
	"fmt"

	"github.com/provlog/provlog/log"
)

// ErrConflict is returned (wrapped) by [Store.Swap] when the recorded
// checkpoint is no longer the one the caller read.
var ErrConflict = errors.New("the recorded checkpoint changed")

// A Store keeps, for each log origin, the signed checkpoint note a witness
// last recorded: the latest it cosigned (witness/server) or verified
// (witness/pull). Implementations must be safe for concurrent use.
type Store interface {
	// Latest returns the recorded note for origin, or nil if there is none.
	Latest(ctx context.Context, origin string) ([]byte, error)

	// Swap records note for origin if the recorded note is now old (nil:
	// none). When it returns nil, the new note is durable. If another note
	// is recorded, it changes nothing and returns an error wrapping
	// ErrConflict. Any other error leaves the outcome unknown, and from
	// then on Latest must not return a note that is not durable (a
	// witness reads it back and answers from it): witnesspebble.KV fails
	// every call until it is reopened.
	Swap(ctx context.Context, origin string, old, note []byte) error
}

// A KV is a durable key-value store with compare-and-swap, as
// witnesspebble.KV is.
type KV interface {
	// Get returns the value of key, or an error wrapping log.ErrNotFound.
	Get(key []byte) ([]byte, error)
	// CompareAndSwap sets key to new, durably, if it now holds old (nil:
	// absent); if it holds anything else it changes nothing and returns an
	// error wrapping ErrConflict.
	CompareAndSwap(key, old, new []byte) error
}

// KVStore returns a [Store] keeping each origin's note in kv under the key
// "checkpoint/<origin>".
func KVStore(kv KV) Store { return kvStore{kv} }

type kvStore struct{ kv KV }

func checkpointKey(origin string) []byte { return []byte("checkpoint/" + origin) }

func (s kvStore) Latest(_ context.Context, origin string) ([]byte, error) {
	v, err := s.kv.Get(checkpointKey(origin))
	if errors.Is(err, log.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the recorded checkpoint of %q: %w", origin, err)
	}
	return v, nil
}

// Swap trusts the KV to tell a changed value from a failed write: reading
// the value back cannot, since a failed write may be readable.
func (s kvStore) Swap(_ context.Context, origin string, old, note []byte) error {
	if err := s.kv.CompareAndSwap(checkpointKey(origin), old, note); err != nil {
		return fmt.Errorf("recording the checkpoint of %q: %w", origin, err)
	}
	return nil
}
