// Package witnesspebble is the witness's durable state in Pebble: a small
// key-value map with compare-and-swap ([witness.KV]), where
// [witness.KVStore] keeps the latest checkpoint the witness verified for
// each log it follows. It is not a log and shares nothing with a log
// store (log/logpebble): its keys are whatever the caller chooses.
//
// # Faults
//
// A write that fails stops the KV ([ErrFailed]). Faults in Pebble's own
// background work are not caught yet, as log/logpebble catches them (its
// faultfs.go and gate.go, unexported there): on a disk that refuses a
// flush's table Pebble v2.1.7 retries the flush at once, for ever (53,000
// attempts in 5 s under errorfs), and once its memtables are full every
// write waits for good; a WAL rotation (every 2 MiB written) that cannot
// create its file ends the process ("sync: unlock of unlocked mutex").
// Sharing the log store's guard needs it exported from log/logpebble as
// one piece (file system, compaction gate, event listener, logger, and the
// check after a commit).
package witnesspebble

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// ErrLocked is returned (wrapped) by [Open] when another process, or
// another open KV, holds the directory.
var ErrLocked = errors.New("witness store is in use by another process")

// ErrCorrupt is returned (wrapped) by [Open] when Pebble finds the
// database corrupt.
var ErrCorrupt = errors.New("witness store is corrupt")

var errClosed = errors.New("witness store is closed")

// ErrFailed is returned (wrapped) by every call after a write failed.
// Pebble applies a write to its memtable before the write-ahead log's
// sync reports, so a failed write can be read back though it is not on
// disk; a witness that read it answered 409 naming a checkpoint it never
// recorded and then cosigned it. So after a failed write the KV reads and
// writes nothing until it is opened again, from what the disk holds.
var ErrFailed = errors.New("witness store failed a write; restart to reopen it from disk")

// formatMajorVersion pins the on-disk format, as log/logpebble does its own.
const formatMajorVersion = pebble.FormatValueSeparation

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
	failed atomic.Pointer[error] // the first failed write
}

// Open opens the store in dir, creating it if needed. It fails with an
// error wrapping [ErrLocked] if another process (or another open KV)
// holds the directory.
func Open(dir string) (*KV, error) { return open(dir, vfs.Default) }

// open is Open on the file system fs (tests inject faults through it).
func open(dir string, fsys vfs.FS) (*KV, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	lock, err := pebble.LockDirectory(dir, fsys)
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
		FS:                 fsys,
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
	if err := kv.usable(); err != nil {
		return nil, err
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
// returns an error wrapping [witness.ErrConflict]. new must not be nil.
func (kv *KV) CompareAndSwap(key, old, new []byte) error {
	if new == nil {
		return errors.New("compare-and-swap: new value is nil")
	}
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	if err := kv.usable(); err != nil {
		return err
	}
	l := &kv.locks[maphash.Bytes(kv.seed, key)%kvStripes]
	l.Lock()
	defer l.Unlock()
	cur, err := kv.get(key)
	switch {
	case errors.Is(err, log.ErrNotFound):
		if old != nil {
			return fmt.Errorf("key %q is absent: %w", key, witness.ErrConflict)
		}
	case err != nil:
		return err
	case old == nil || !bytes.Equal(cur, old):
		return fmt.Errorf("key %q: %w", key, witness.ErrConflict)
	}
	if err := kv.set(key, new); err != nil {
		err = fmt.Errorf("writing key %q: %w", key, err)
		kv.failed.CompareAndSwap(nil, &err)
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return nil
}

// usable returns why the KV may not be used, or nil. Call with mu held.
func (kv *KV) usable() error {
	if kv.closed {
		return errClosed
	}
	if err := kv.failed.Load(); err != nil {
		return fmt.Errorf("%w (%w)", ErrFailed, *err)
	}
	return nil
}

// set writes key durably. Pebble v2.1.7 panics when its write-ahead log
// refuses a record and calls Logger.Fatalf (kvLogger panics) when the
// sync fails: both are this write's error.
func (kv *KV) set(key, value []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return kv.db.Set(key, value, pebble.Sync)
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
