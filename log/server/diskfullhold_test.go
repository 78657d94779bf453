package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// diskFull is a shared store of one writer whose disk, while full, refuses
// every commit that writes (log.ErrDiskFull) and passes one that writes
// nothing, as PostgreSQL does.
type diskFull struct {
	*logtest.Memory
	full atomic.Bool
}

func (s *diskFull) CommitShared(ctx context.Context, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error)) error {
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	b, err := build(st, make([]bool, len(fences)))
	if err != nil || b == nil {
		return err
	}
	if s.full.Load() {
		return fmt.Errorf("commit: %w: %w: no space", log.ErrUnavailable, log.ErrDiskFull)
	}
	return s.Commit(ctx, b)
}

func (s *diskFull) Latest(ctx context.Context) (log.State, error) { return s.State(ctx) }
func (s *diskFull) Follow(func(log.State))                        {}

// TestUnavailableHoldsDiskFull: after a commit refused for a full disk,
// Unavailable says so (its probe, a commit that writes nothing, would
// pass) until a commit goes through, or, with none tried, until
// diskFullHold has passed; then the probe decides again.
func TestUnavailableHoldsDiskFull(t *testing.T) {
	ctx := context.Background()
	store := &diskFull{Memory: logtest.NewMemory()}
	signer, verifier := logtest.NewKey(t, "provlog.test/diskfull")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if _, err := seq.Append(ctx, []byte(`{"n":0}`)); err != nil {
		t.Fatal(err)
	}
	store.full.Store(true)
	if _, err := seq.Append(ctx, []byte(`{"n":1}`)); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("an append on a full disk: %v", err)
	}
	for i := range 3 {
		if err := seq.Unavailable(); !errors.Is(err, log.ErrDiskFull) {
			t.Fatalf("Unavailable (%d) after a commit refused for space: %v; want disk full", i, err)
		}
	}
	// The hold has passed, no commit tried: the failure is made as old.
	p := seq.unavailable.Load()
	seq.unavailable.Store(&unavailableCommit{p.err, p.at.Add(-diskFullHold)})
	if err := seq.Unavailable(); err != nil {
		t.Errorf("Unavailable past the hold: %v; want the probe to decide (nil)", err)
	}
	if _, err := seq.Append(ctx, []byte(`{"n":2}`)); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("an append on a full disk: %v", err)
	}
	store.full.Store(false)
	if _, err := seq.Append(ctx, []byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := seq.Unavailable(); err != nil {
		t.Errorf("Unavailable after a commit went through: %v", err)
	}
}
