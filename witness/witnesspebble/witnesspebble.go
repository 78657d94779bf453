// Package witnesspebble is the witness's durable state in Pebble: a small
// key-value map with compare-and-swap ([witness.KV]), where
// [witness.KVStore] keeps the latest checkpoint the witness verified for
// each log it follows. It is not a log and shares nothing with a log
// store (log/logpebble): its keys are whatever the caller chooses.
//
// # Faults
//
// Pebble runs on the log store's guard (log/pebbleguard): the first
// storage fault, in a write or in Pebble's own background work, stops the
// KV ([ErrFailed], naming the fault) instead of the process, and the disk
// keeps what it had. Without it, on a disk that refused a flush's table
// Pebble v2.1.7 retried the flush at once, for ever (53,000 attempts in
// 5 s under errorfs), and once its memtables were full every write waited
// for good; a WAL rotation (every 2 MiB written) that could not create
// its file ended the process ("sync: unlock of unlocked mutex"). A write
// held in Pebble when the fault hit (waiting in a write stall for a flush
// the failed store never completes) fails after a grace period, outcome
// unknown, where it waited for good holding its log's lock; and Open on a
// disk too full for Pebble to flush what it replays from the write-ahead
// log fails, naming the fault, where it never returned. A panic inside
// Pebble's commit stops the KV likewise ([pebbleguard.ErrPanicked]), and
// Close then leaves the instance alone: the panic may have left Pebble's
// locks held, and closing it waited for them for good.
//
// # Going back
//
// Pebble v2.1.7 reads a damaged last write-ahead log record as a write
// torn by a crash and drops it in silence; a witness reopened so would be
// behind a checkpoint it cosigned and could cosign another at that size.
// So each checkpoint key's size and root is also recorded outside Pebble,
// after its sync and before CompareAndSwap returns, and Open refuses a
// Pebble state behind that record ([ErrCorrupt], naming the origin, both
// sizes and the file); recorded.go says what a crash leaves.
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
	"github.com/provlog/provlog/log/pebbleguard"
	"github.com/provlog/provlog/witness"
)

// ErrLocked is returned (wrapped) by [Open] when another process, or
// another open KV, holds the directory.
var ErrLocked = errors.New("witness store is in use by another process")

// ErrCorrupt is returned (wrapped) by [Open] when Pebble finds the
// database corrupt.
var ErrCorrupt = errors.New("witness store is corrupt")

var errClosed = errors.New("witness store is closed")

// ErrFailed is returned (wrapped, with the fault) by every call after a
// storage fault. Pebble applies a write to its memtable before the
// write-ahead log's sync reports, so a failed write can be read back
// though it is not on disk; a witness that read it answered 409 naming a
// checkpoint it never recorded and then cosigned it. So after a fault the
// KV reads and writes nothing until it is opened again, from what the
// disk holds.
var ErrFailed = errors.New("witness store failed; restart to reopen it from disk")

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
	fs    *pebbleguard.FS
	lock  *pebble.Lock
	seed  maphash.Seed
	locks [kvStripes]sync.Mutex

	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
	failed atomic.Pointer[error] // the first storage fault
	stop   chan struct{}         // closed when failed is set

	rec *recorder // the recorded-checkpoint record (recorded.go)

	// testingOnlyRecorded, if not nil, is called between Pebble's synced
	// commit and the record's write (a test kills the process there).
	testingOnlyRecorded func()
}

// Open opens the store in dir, creating it if needed. It fails with an
// error wrapping [ErrLocked] if another process (or another open KV)
// holds the directory.
func Open(dir string) (*KV, error) { return open(dir, vfs.Default, nil) }

// open is Open on the file system fsys (tests inject faults through it),
// sending Pebble's log lines and events to logf (nil: dropped).
func open(dir string, fsys vfs.FS, logf func(format string, args ...any)) (*KV, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	// Locked on fsys, not the guard's FS: that one only checks the lock
	// on a read-only file system, for a store that then opens read-only,
	// and the witness cannot serve read-only; this fails, naming why.
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		return nil, fmt.Errorf("opening store %s: %w (%v)", dir, ErrLocked, err)
	}
	kv := &KV{lock: lock, seed: maphash.MakeSeed(), stop: make(chan struct{})}
	kv.fs = pebbleguard.NewFS(fsys, kv.fail, func() bool { return kv.failed.Load() != nil })
	po := &pebble.Options{
		FormatMajorVersion: formatMajorVersion,
		CacheSize:          8 << 20,
		MemTableSize:       2 << 20,
		Lock:               lock,
		FS:                 kv.fs,
		Logger:             pebbleguard.Logger{Logf: logf, Fail: kv.fs.Record},
		EventListener:      kv.fs.EventListener(logf, nil, dir, ErrCorrupt),
	}
	po.Experimental.CompactionScheduler = kv.fs.CompactionScheduler()
	kv.db, err = kv.fs.OpenDB(dir, po, kv.stop)
	if err == nil {
		if f := kv.failed.Load(); f != nil {
			kv.closed = true
			kv.fs.EndWaits()
			kv.db.Close()
			err = *f
		}
	}
	if err == nil {
		if kv.rec, err = openRecorder(dir, kv.db, kv.get); err != nil {
			kv.closed = true
			kv.fs.EndWaits()
			kv.db.Close()
		}
	}
	if err != nil {
		lock.Close()
		if f := kv.failed.Load(); f != nil && !errors.Is(err, *f) {
			err = fmt.Errorf("%w (%w)", err, *f)
		}
		if pebble.IsCorruptionError(err) && !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("opening store %s: %w: %w", dir, ErrCorrupt, err)
		}
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	return kv, nil
}

// fail records err as the KV's fault; the first one wins.
func (kv *KV) fail(err error) {
	if kv.failed.CompareAndSwap(nil, &err) {
		close(kv.stop)
	}
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
// returns an error wrapping [witness.ErrConflict]. If it returns an error
// wrapping [ErrFailed], new may or may not be durable. new must not be
// nil.
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
	err = kv.fs.Commit(kv.stop, func() error { return kv.db.Set(key, new, pebble.Sync) })
	if err != nil && !errors.Is(err, pebbleguard.ErrHeld) {
		kv.fail(log.FileFault("writing key", string(key), err))
	}
	if f := kv.failed.Load(); f != nil {
		// Also when the write returned nil: the guard keeps a write-ahead
		// log's fault from Pebble, whose commit then returns as if synced.
		return fmt.Errorf("writing key %q: outcome unknown: %w (%w)", key, ErrFailed, *f)
	}
	if m, ok := markOf(key, new); ok {
		if kv.testingOnlyRecorded != nil {
			kv.testingOnlyRecorded()
		}
		if err := kv.rec.write(string(key), m); err != nil {
			kv.fail(err)
			return fmt.Errorf("writing key %q: outcome unknown: %w (%w)", key, ErrFailed, err)
		}
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

// Close closes the store and releases its directory; if Pebble panicked
// in a write, it releases neither (the process's exit does) and returns.
func (kv *KV) Close() error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.closed {
		return errClosed
	}
	kv.closed = true
	err := kv.rec.w.Close()
	if cerr := kv.fs.Close(kv.db, kv.lock); cerr != nil {
		err = cerr
	}
	return err
}
