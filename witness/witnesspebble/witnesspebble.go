// Package witnesspebble is the witness's durable state in Pebble: a small
// key-value map with compare-and-swap ([witness.KV]), where
// [witness.KVStore] keeps the latest checkpoint the witness verified for
// each log it follows. It is not a log and shares nothing with a log
// store (log/logpebble): its keys are whatever the caller chooses.
package witnesspebble

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log"
)

// ErrLocked is returned (wrapped) by [Open] when another process, or
// another open KV, holds the directory.
var ErrLocked = errors.New("witness store is in use by another process")

// ErrCorrupt is returned (wrapped) by [Open] when Pebble finds the
// database corrupt.
var ErrCorrupt = errors.New("witness store is corrupt")

var errClosed = errors.New("witness store is closed")

// formatMajorVersion pins the on-disk format, as log/logpebble does its own.
const formatMajorVersion = pebble.FormatValueSeparation

// ErrConflict is returned (wrapped) by [KV.CompareAndSwap] when the key
// does not hold the expected value.
var ErrConflict = errors.New("value changed")

// kvStripes is the number of locks CompareAndSwap spreads keys over, so
// that swaps of different keys commit concurrently and share fsyncs.
const kvStripes = 64

// A KV is a small durable key-value store with compare-and-swap, in its
// own Pebble directory. It is safe for concurrent use. It locks its
// directory: one process at a time.
type KV struct {
	db    *pebble.DB
	lock  *pebble.Lock
	seed  maphash.Seed
	locks [kvStripes]sync.Mutex

	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
}

// Open opens the store in dir, creating it if needed. It fails with an
// error wrapping [ErrLocked] if another process (or another open KV)
// holds the directory.
func Open(dir string) (*KV, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		return nil, fmt.Errorf("opening store %s: %w (%v)", dir, ErrLocked, err)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		FormatMajorVersion: formatMajorVersion,
		CacheSize:          8 << 20,
		MemTableSize:       2 << 20,
		Lock:               lock,
		FS:                 vfs.Default,
		Logger:             kvLogger{},
	})
	if err != nil {
		lock.Close()
		if pebble.IsCorruptionError(err) {
			return nil, fmt.Errorf("opening store %s: %w: %w", dir, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	return &KV{db: db, lock: lock, seed: maphash.MakeSeed()}, nil
}

// Get returns the value of key, or an error wrapping [log.ErrNotFound].
func (kv *KV) Get(key []byte) ([]byte, error) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	if kv.closed {
		return nil, errClosed
	}
	return kv.get(key)
}

func (kv *KV) get(key []byte) ([]byte, error) {
	v, closer, err := kv.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("key %q: %w", key, log.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading key %q: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// CompareAndSwap sets key to new if it now holds old, where a nil old
// means the key is absent. When it returns nil, new is durable (the write
// is synced). If the key holds anything else, it changes nothing and
// returns an error wrapping [ErrConflict]. new must not be nil.
func (kv *KV) CompareAndSwap(key, old, new []byte) error {
	if new == nil {
		return errors.New("compare-and-swap: new value is nil")
	}
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	if kv.closed {
		return errClosed
	}
	l := &kv.locks[maphash.Bytes(kv.seed, key)%kvStripes]
	l.Lock()
	defer l.Unlock()
	cur, err := kv.get(key)
	switch {
	case errors.Is(err, log.ErrNotFound):
		if old != nil {
			return fmt.Errorf("key %q is absent: %w", key, ErrConflict)
		}
	case err != nil:
		return err
	case old == nil || !bytes.Equal(cur, old):
		return fmt.Errorf("key %q: %w", key, ErrConflict)
	}
	if err := kv.db.Set(key, new, pebble.Sync); err != nil {
		return fmt.Errorf("writing key %q: %w", key, err)
	}
	return nil
}

// Close closes the store and releases its directory.
func (kv *KV) Close() error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.closed {
		return errClosed
	}
	kv.closed = true
	err := kv.db.Close()
	if lerr := kv.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// kvLogger drops Pebble's log lines, which would otherwise go to stderr,
// and panics where Pebble's own logger would exit the process.
type kvLogger struct{}

func (kvLogger) Infof(string, ...any)  {}
func (kvLogger) Errorf(string, ...any) {}
func (kvLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
