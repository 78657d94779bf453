package client

import (
	"context"
	"errors"
	"testing"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestWitnessAheadOnAnotherTree: a witness whose 409 names a size above
// the submitted checkpoint is only "behind" on the log's own history if
// its checkpoint of that size is the log's. A log signed with the same
// key but holding other entries (the misbehaving log) reaches the
// witness's size 20 in its own store, so the size alone proves nothing:
// the witness cosigned the honest log's root at 20, and the evil log's
// checkpoint of 15 must be reported as a conflict, not as stale.
func TestWitnessAheadOnAnotherTree(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, origin)
	honest := witnesstest.NewLog(t, k, "honest")
	tw := newTestWitness(t, "witness.example/w1", k)
	if _, err := tw.client(t, honest).Cosign(ctx, honest.Grow(t, 20)); err != nil {
		t.Fatal(err)
	}
	evil := witnesstest.NewLog(t, k, "evil")
	evil.Grow(t, 25)
	_, err := tw.client(t, evil).Cosign(ctx, evil.Checkpoint(t, 15))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("a witness holding another root at size 20 than the log's: error %v (%T), want a ConflictError", err, err)
	}
	if ce.WitnessSize != 20 || ce.Size != 15 {
		t.Errorf("conflict %+v, want witness size 20, checkpoint size 15", ce)
	}

	// The honest log's own stale checkpoint is still merely behind, and
	// the witness's size is then known.
	c := tw.client(t, honest)
	_, err = c.Cosign(ctx, honest.Checkpoint(t, 15))
	var be *BehindError
	if !errors.As(err, &be) || be.WitnessSize < 20 {
		t.Fatalf("the honest log's stale checkpoint: error %v, want a BehindError at size 20 or more", err)
	}
	if c.Size() < 20 {
		t.Errorf("Size() = %d after the witness showed it holds 20, want 20 or more", c.Size())
	}
}
