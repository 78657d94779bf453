package pebbleguard

// Calls held in Pebble. The frozen file system (fs.go) stops a failed
// store from writing, but Pebble also waits for its own flushes, and a
// failed store never completes one: a commit waiting in a write stall
// waits for good (seen: a log's appenders hung for minutes after a failed
// MANIFEST write; a witness request hung holding its log's lock), and so
// does an Open that must flush what it replayed from the write-ahead log
// (seen: a sidecar restarted on a full disk never came up). So a store
// runs its commits through [FS.Commit] and opens through [FS.OpenDB]: each
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

// ErrHeld is returned by [FS.Commit] and [FS.OpenDB] (wrapped) when the store
// failed while Pebble held the call and Pebble did not return it within
// the grace period. Pebble may still finish the call, or never.
var ErrHeld = errors.New("the store failed while Pebble held the call")

// ErrPanicked is returned by [FS.Commit] (wrapped) when Pebble panicked
// in the commit. The panic may have left Pebble's locks held, so the
// instance is wedged: the store must not close it (Close could wait for
// good), nor open its directory again in this process; [FS.Close] leaves
// it alone.
var ErrPanicked = errors.New("Pebble panicked")

// Commit runs commit, a synced write to the Pebble instance on f, on a
// goroutine of its own and returns its error; a panic in it is returned
// as an error wrapping [ErrPanicked], and wedges the instance
// ([FS.Wedged]). failed is closed when the store fails. If it is closed
// while commit runs, Commit waits up to 10 s more, then returns ErrHeld
// and leaves commit to Pebble: a write whose outcome is unknown, and an
// instance [FS.Close] abandons instead of closing, since Pebble's Close
// waits for the flush the write waits for.
func (f *FS) Commit(failed <-chan struct{}, commit func() error) error {
	err, ok := await(failed, commitGrace, func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrPanicked, r)
			}
		}()
		return commit()
	})
	switch {
	case !ok:
		f.held.Store(true)
		return ErrHeld
	case errors.Is(err, ErrPanicked):
		f.wedged.Store(true)
	}
	return err
}

// Wedged reports whether Pebble panicked in a commit on f ([FS.Commit]).
func (f *FS) Wedged() bool { return f.wedged.Load() }

// Held reports whether a commit on f is held in Pebble since the store
// failed ([FS.Commit] returned [ErrHeld]).
func (f *FS) Held() bool { return f.held.Load() }

// Close closes db, the instance on f, and releases lock, the directory
// lock the store opened it with: the one way a store lets go of an
// instance. If a commit is held in db it abandons the instance instead
// (see abandon). If db is wedged ([FS.Wedged]) it touches neither and
// returns nil: Close would wait for a lock the panic may have left held,
// and the process's exit releases both.
func (f *FS) Close(db *pebble.DB, lock *pebble.Lock) error {
	switch {
	case f.Wedged():
		return nil
	case f.Held():
		return f.abandon(lock)
	}
	f.EndWaits() // a failed flush's retry ends: Close does not wait it out
	err := db.Close()
	if lerr := lock.Close(); err == nil {
		err = lerr
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

// abandon lets go of the instance on f without closing it, when a call is
// held in it ([FS.Commit] returned ErrHeld): f is retired, so the instance
// never touches the disk or fails the store again, and lock, the
// directory lock the store opened the instance with, is released, both
// the store's reference and Pebble's (which goes with the instance), so
// that the directory can be opened again, in this process too. The
// backoff of f's failed creations is not ended ([FS.EndWaits]): the
// instance's retries stay one every few seconds, not a spin.
func (f *FS) abandon(lock *pebble.Lock) error {
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
