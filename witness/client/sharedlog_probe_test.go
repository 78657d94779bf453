package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestProbeSharedLogLaggingSidecarFalseConflict: several sidecars serve one
// log (DESIGN §3, "Many sidecars, one log": PostgreSQL, each sidecar with
// its own Cosigner, cmd/provlog openWitnessing) and ask the same witness.
// Sidecar A's cosigner gets checkpoint 20 cosigned; sidecar B, whose
// sequencer had signed checkpoint 15 a moment before (it follows A's
// commits only as the store learns of them, and its cosigner coalesces
// for 250ms), then submits 15. The witness answers 409 "20": it is ahead
// on the same, consistent history.
//
// What is wrong: Witness.Cosign turns every 409 naming a size above the
// submitted checkpoint's into a *ConflictError ("it cosigned size 20,
// larger than the log's checkpoint of size 15"), the Cosigner hands it to
// OnConflict, and the sidecar appends a witness.conflict entry claiming
// the witness "holds another history of the log". Observed: OnConflict
// called once, witness size 20, checkpoint size 15, although the log's own
// store holds the tree of size 20 that the witness cosigned. B's status
// also shows a conflict for a healthy witness.
//
// Cause: witness/client/witness.go, Cosign, case we.Size > c.Size. Fix:
// before calling it a conflict, check whether the log's nodes hold a tree
// of size we.Size (log.ProveConsistency(ctx, w.nodes, c.Size, we.Size)
// succeeds on a shared store that grew); then the submission is merely
// stale: return a plain error (or nothing) and let the next checkpoint go.
// A lone log that never reached that size (the evil twin of
// TestWitnessConflict, w3 in TestCosigner) still gets its conflict.
func TestProbeSharedLogLaggingSidecarFalseConflict(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "shared") // the one log both sidecars serve
	w := newTestWitness(t, "witness.example/w1", k)

	var (
		mu        sync.Mutex
		conflicts []*ConflictError
	)
	start := func(onConflict func(*ConflictError, []byte)) *Cosigner {
		c, err := NewCosigner(CosignerOptions{
			Log:        k.Verifier,
			Witnesses:  []*Witness{w.client(t, l)},
			Threshold:  1,
			Interval:   10 * time.Millisecond,
			MaxBackoff: 100 * time.Millisecond,
			OnConflict: onConflict,
		})
		if err != nil {
			t.Fatal(err)
		}
		go c.Run(ctx)
		return c
	}
	a := start(nil)
	b := start(func(ce *ConflictError, cp []byte) { mu.Lock(); conflicts = append(conflicts, ce); mu.Unlock() })

	cp15 := l.Grow(t, 15) // B's sequencer signed this one
	cp20 := l.Grow(t, 20) // A's commit, a moment later
	a.Submit(cp20)
	proctest.WaitFor(t, "sidecar A's checkpoint cosigned", func() bool { return a.Latest() != nil })
	b.Submit(cp15)
	proctest.WaitFor(t, "sidecar B's witness answered", func() bool {
		st := b.Status().Witnesses[0]
		return !st.LastSuccess.IsZero() || st.LastError != ""
	})
	mu.Lock()
	defer mu.Unlock()
	for _, ce := range conflicts {
		t.Errorf("a witness ahead on the same history was reported as a conflict (a witness.conflict entry): witness size %d, checkpoint size %d: %s",
			ce.WitnessSize, ce.Size, ce.Detail)
	}
	if st := b.Status().Witnesses[0]; st.Conflict != "" {
		t.Errorf("sidecar B's status shows a conflict for a healthy witness: %s", st.Conflict)
	}
}
