package pebbleguard

// Calls held in Pebble. The frozen file system (fs.go) stops a failed
// store from writing, but Pebble also waits for its own flushes, and a
// failed store never completes one: a commit waiting in a write stall
// waits for good (seen: a log's appenders hung for minutes after a failed
// MANIFEST write; a witness request hung holding its log's lock), and so
// does an Open that must flush what it replayed from the write-ahead log
// (seen: a sidecar restarted on a full disk never came up). So a store
// runs its commits through [Commit] and opens through [FS.OpenDB]: each
// call runs on a goroutine of its own, and once the store has failed the
// caller waits for it only a grace period, then gives up on it and on
// the instance.

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/provlog/provlog/log"
)

// Grace periods after the store failed. A call that is not held up
// returns at once (a failed store's journals accept everything).
const (
	commitGrace = 10 * time.Second
	openGrace   = 2 * time.Second
)

// ErrHeld is returned by [Commit] and [FS.OpenDB] (wrapped) when the store
// failed while Pebble held the call and Pebble did not return it within
// the grace period. Pebble may still finish the call, or never.
var ErrHeld = errors.New("the store failed while Pebble held the call")

// ErrPanicked is returned by [Commit] (wrapped) when Pebble panicked in
// the commit. The panic may have left Pebble's locks held, so the store
// must not close the instance (Close could wait for good).
var ErrPanicked = errors.New("Pebble panicked")

// Commit runs commit, a synced write to the Pebble instance of a store,
// on a goroutine of its own and returns its error; a panic in it is
// returned as an error wrapping [ErrPanicked]. failed is closed when the store fails. If it is
// closed while commit runs, Commit waits up to 10 s more, then returns
// ErrHeld and leaves commit to Pebble: a write whose outcome is unknown.
// The store must then let go of the instance with [FS.Abandon], not close
// it: Pebble's Close waits for the flush the write waits for.
func Commit(failed <-chan struct{}, commit func() error) error {
	err, ok := await(failed, commitGrace, func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanicked, r)
			}
		}()
		return commit()
	})
	if !ok {
		return ErrHeld
	}
	return err
}

// OpenDB runs pebble.Open(dir, po) for the store whose file system is f
// (po.FS must be f). A panic in Pebble becomes an error wrapping
// [log.ErrIO], and the store's failure. failed is closed when the store
// fails; if it is closed while Pebble opens (Pebble v2.1.7's Open waits
// for the flush of the memtables it replayed, which a full disk refuses
// for ever), OpenDB waits up to 2 s more, then gives up on the instance and
// returns an error wrapping ErrHeld: f is retired, so the instance never
// touches the disk or fails the store again, and Pebble's reference to
// po.Lock is released. The caller still releases its own.
func (f *FS) OpenDB(dir string, po *pebble.Options, failed <-chan struct{}) (*pebble.DB, error) {
	type opened struct {
		db  *pebble.DB
		err error
	}
	r, ok := await(failed, openGrace, func() (r opened) {
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("%w: Pebble panicked opening %s: %v", log.ErrIO, dir, p)
				f.Record(r.err)
			}
		}()
		db, err := pebble.Open(dir, po)
		return opened{db, err}
	})
	if !ok {
		f.Retire()
		if po.Lock != nil {
			po.Lock.Close() // Pebble's reference
		}
		return nil, fmt.Errorf("Pebble could not finish opening: %w", ErrHeld)
	}
	return r.db, r.err
}

// Abandon lets go of the instance on f without closing it, when a call is
// held in it ([Commit] returned ErrHeld): f is retired, so the instance
// never touches the disk or fails the store again, and lock, the
// directory lock the store opened the instance with, is released, both
// the store's reference and Pebble's (which goes with the instance), so
// that the directory can be opened again, in this process too. The
// backoff of f's failed creations is not ended ([FS.EndWaits]): the
// instance's retries stay one every few seconds, not a spin.
func (f *FS) Abandon(lock *pebble.Lock) error {
	f.Retire()
	lock.Close()
	return lock.Close()
}

// await runs call on a goroutine of its own and returns its result. If
// failed is closed first and call does not return within grace after
// that, await returns ok false, and call goes on (and ends, if ever) on
// its own.
func await[T any](failed <-chan struct{}, grace time.Duration, call func() T) (r T, ok bool) {
	done := make(chan T, 1)
	go func() { done <- call() }()
	select {
	case r := <-done:
		return r, true
	case <-failed:
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case r := <-done:
		return r, true
	case <-t.C:
		return r, false
	}
}
