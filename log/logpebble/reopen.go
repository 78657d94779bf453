package logpebble

// Recovery in place. A store that failed stays failed: the Pebble instance
// that met the fault had its write-ahead log frozen (log/pebbleguard), so
// its memory may hold commits the disk never got, and it is never written
// to again. Reopen replaces it: the old instance is closed (or, if a commit is
// held up in it, abandoned) with its file system retired, so that it can
// neither touch the disk nor fail the store again, and Pebble is opened
// afresh on the directory through the same path as Open, with every check
// Open makes (the stored state against the data, the published-batch
// record: nothing acknowledged may be missing). What reopening can bring
// back is what a restart brings back, without the restart.
//
// Only faults that can pass are reopened: a full disk (space freed), a
// read-only file system (remounted), an I/O error. Corruption, lost
// entries and a panic inside Pebble are not: they need an operator.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/provlog/provlog/log"
)

// reopenWait bounds how long a read waits for a Reopen under way before it
// fails with errReopening (a read made inside another, such as from a
// Checkpoints callback, must not hold the Reopen up for longer).
const reopenWait = 5 * time.Second

var errReopening = fmt.Errorf("%w: the log store is reopening after a fault; try again", log.ErrUnavailable)

// waitReopen waits for a Reopen under way (ch closed), up to reopenWait.
func waitReopen(ctx context.Context, ch <-chan struct{}) error {
	t := time.NewTimer(reopenWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return errReopening
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrNotReopened is returned (wrapped) by [Store.Reopen] when the store's
// fault is one that reopening cannot mend, or the disk is still full; the
// store is left as it was.
var ErrNotReopened = errors.New("log store not reopened")

// Reopen reopens a failed store in place (see the top of reopen.go): on
// success it takes commits again and Err is nil; its state may be larger
// than before if the commit under way when it failed did reach the disk.
// A store that has not failed is left alone.
//
// Reopen refuses (ErrNotReopened, the store untouched) a store opened
// with Options.ReadOnly, one whose fault is corruption or lost entries or
// a panic inside Pebble, and, for a full disk, one whose file system
// still has less than [Store.ReopenSpace] free. Otherwise the old Pebble
// instance is let go and a new one opened; if that cannot write either,
// the store is read-only again and Reopen returns why; if it fails the
// checks Open makes, the store is left failed with that error and serves
// no reads.
func (s *Store) Reopen(ctx context.Context) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.canReopen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	done := make(chan struct{})
	s.reopening = done
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.reopening = nil
		s.mu.Unlock()
		close(done)
	}()
	s.calls.Wait()

	was := s.Err()
	old := s.fs
	old.Retire()
	if err := s.closePebble(); err != nil {
		s.logf("logpebble: closing the failed Pebble instance in %s: %v", s.dir, err)
	}
	if err := s.open(); err != nil {
		s.db, s.lock, s.pub = nil, nil, nil
		s.r = deadReader{err}
		s.mu.Lock()
		s.failure = err
		s.mu.Unlock()
		s.errorf("logpebble: reopening %s after %v failed: %v", s.dir, was, err)
		return err
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("reopened log store %s, but it still cannot be written: %w", s.dir, err)
	}
	s.logf("logpebble: reopened %s after %v: it takes commits again at size %d", s.dir, was, s.state.Size)
	return nil
}

// canReopen says why s is not to be reopened now (nil: it is).
func (s *Store) canReopen() error {
	s.mu.Lock()
	failure := s.failure
	s.mu.Unlock()
	switch {
	case failure == nil:
		return fmt.Errorf("%w: it has not failed", ErrNotReopened)
	case s.opts.ReadOnly:
		return fmt.Errorf("%w: it was opened read-only", ErrNotReopened)
	case s.fs.Wedged():
		return fmt.Errorf("%w: Pebble panicked in it and may hold its locks; restart the process", ErrNotReopened)
	case errors.Is(failure, log.ErrCorrupt), errors.Is(failure, log.ErrLost):
		return fmt.Errorf("%w: %v needs an operator, not a reopen", ErrNotReopened, log.FaultReason(failure))
	case errors.Is(failure, log.ErrDiskFull):
		free, err := s.freeSpace()
		if err != nil {
			return fmt.Errorf("%w: the disk was full and its free space cannot be read: %v", ErrNotReopened, err)
		}
		if want := s.ReopenSpace(); free < want {
			return fmt.Errorf("%w: the disk is still full: %d bytes free, at least %d needed", ErrNotReopened, free, want)
		}
	}
	return nil
}

// ReopenSpace is the free space Reopen wants before it reopens a store
// that failed on a full disk: room for Pebble to flush both memtables and
// start a new write-ahead log, so that the reopened store does not fill
// the disk again at once.
func (s *Store) ReopenSpace() uint64 {
	return max(3*s.opts.MemTableSize, 4<<20)
}

// freeSpace is what the store's file system has free for it.
func (s *Store) freeSpace() (uint64, error) {
	u, err := s.fs.Unwrap().GetDiskUsage(s.dir)
	if err != nil {
		return 0, err
	}
	return u.AvailBytes, nil
}

// deadReader stands in for Pebble after a Reopen that could not open it:
// every read fails with why.
type deadReader struct{ err error }

func (d deadReader) Get([]byte) ([]byte, io.Closer, error) { return nil, nil, d.err }

func (d deadReader) NewIter(*pebble.IterOptions) (*pebble.Iterator, error) { return nil, d.err }
