package server

// Resuming a stopped log in place. A sequencer stops at the first failed
// commit (its outcome unknown) or store fault, and stays stopped: it does
// not guess what the disk holds. Resume asks the store to reopen itself
// with every check of a fresh open (a store that can: logpebble), then
// takes the tree from the reopened store as OpenSequencer would, and
// checks it against the last checkpoint this sequencer handed out: the
// same tree, or a larger one that extends it (the commit under way when
// the store failed did reach the disk). Anything else is a loss, and the
// sequencer stays stopped with a *log.LostError.
//
// Which faults are resumed on their own, and which wait for an operator:
// only a full disk is retried (SequencerOptions.RetryDiskFull), with
// backoff, since freeing space is the whole remedy and the store refuses
// to reopen until there is room. A read-only file system or an I/O error
// points at a device or a mount an operator must look at; corruption and
// lost entries are never resumed (the store refuses).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/provlog/provlog/log"
)

// retryDiskFullMax is the longest wait between two tries of RetryDiskFull.
const retryDiskFullMax = 30 * time.Second

// reopener is a store that can reopen itself in place after a fault
// (logpebble.Store.Reopen).
type reopener interface {
	Reopen(ctx context.Context) error
}

// Resume restarts a sequencer that stopped on a storage fault, in place;
// see the top of resume.go. It returns nil if the log takes appends again
// (or never stopped), and otherwise why not, the sequencer still stopped.
func (s *Sequencer) Resume(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	closing := s.closing
	if !closing {
		s.senders.Add(1)
	}
	s.mu.RUnlock()
	if closing {
		return ErrClosed
	}
	defer s.senders.Done()
	// Queued as an append is, so that it runs between two commits.
	req := &request{resume: true, reply: make(chan result, 1)}
	return s.await(req, s.enqueue(req)).err
}

// reopen is Resume, run by the caller that leads (no commit runs).
func (s *Sequencer) reopen() error {
	if s.Err() == nil {
		return nil
	}
	r, ok := s.store.(reopener)
	if !ok || s.shared != nil {
		return errors.New("this log store cannot be reopened in place: restart provlog")
	}
	ctx := context.Background()
	if err := r.Reopen(ctx); err != nil {
		return fmt.Errorf("resuming the log: %w", err)
	}
	st, err := s.store.State(ctx)
	if err != nil {
		return fmt.Errorf("resuming the log: reading its state: %w", err)
	}
	rng, root, err := openTree(st, s.verifier)
	if err != nil {
		return fmt.Errorf("resuming the log: %w", err)
	}
	s.mu.RLock()
	size, cp, held := s.size, s.cp, s.root
	s.mu.RUnlock()
	const source = "the sequencer's last acknowledged checkpoint"
	switch {
	case st.Size < size || (st.Size == size && !bytes.Equal(root, held)):
		err = &log.LostError{Source: source, Size: size, Root: held, HeldSize: st.Size, HeldRoot: root}
	case st.Size > size && size > 0:
		err = CheckHandedOut(ctx, s.store, s.verifier, source, cp)
	}
	if err != nil {
		s.mu.Lock()
		s.failed = fmt.Errorf("log stopped: reopening the store: %w", err)
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	s.rng, s.size, s.cp, s.root, s.failed = rng, st.Size, st.Checkpoint, root, nil
	s.mu.Unlock()
	return nil
}

// retryDiskFull resumes a log stopped on a full disk, trying after wait,
// then backing off up to retryDiskFullMax while it does not resume.
func (s *Sequencer) retryDiskFull(first time.Duration) {
	defer s.wg.Done()
	wait := first
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		err := s.Err()
		switch {
		case err == nil || !errors.Is(err, log.ErrDiskFull) || errors.Is(err, log.ErrLost) || errors.Is(err, log.ErrCorrupt):
			wait = first
		case s.Resume(context.Background()) == nil:
			wait = first
		default:
			wait = min(2*wait, retryDiskFullMax)
		}
		t.Reset(wait)
	}
}
