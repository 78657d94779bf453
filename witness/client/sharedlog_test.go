package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestSharedLogLaggingSidecarNoConflict: several sidecars serve one log
// (DESIGN §3, "Many sidecars, one log") and ask the same witness. Sidecar
// A gets checkpoint 20 cosigned; sidecar B, whose sequencer signed 15 a
// moment before, then submits 15, and the witness answers 409 "20". The
// log's own store holds the tree of size 20, so the witness is merely
// ahead on the same history: B must report no conflict (no
// witness.conflict entry) and show none in its status. A lone log that
// never reached that size still gets its conflict (TestWitnessConflict).
func TestSharedLogLaggingSidecarNoConflict(t *testing.T) {
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
		return !st.LastSuccess.IsZero() || st.LastError != "" || st.Size >= 20
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
