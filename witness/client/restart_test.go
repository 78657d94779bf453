package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestRestartCosignsOnce: the sidecar restarts while its log has not
// grown. The new Cosigner starts from the saved cosigned checkpoint
// (Initial: cp with w1's cosignature) and submits the same cp; w1 cosigns
// it again, with a new timestamp. Latest keeps one cosignature by w1: two
// lines by one key are what log.OpenNote refuses, so the sidecar would
// hand out receipts its own verifiers refuse.
func TestRestartCosignsOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "honest")
	w1 := newTestWitness(t, "witness.example/w1", k)
	cp := l.Grow(t, 9)

	run := func(initial []byte) *Cosigner {
		c, err := NewCosigner(CosignerOptions{Log: k.Verifier, Witnesses: []*Witness{w1.client(t, l)}, Threshold: 1, Initial: initial, Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go c.Run(ctx)
		return c
	}
	first := run(nil)
	first.Submit(cp)
	proctest.WaitFor(t, "the first run's cosigned checkpoint", func() bool { return first.Latest() != nil })
	saved := first.Latest()

	time.Sleep(1100 * time.Millisecond) // cosignature timestamps have a second's resolution
	second := run(saved)                // the restart
	n := w1.requests.Load()
	second.Submit(cp) // witnessing.run submits the log's latest checkpoint
	proctest.WaitFor(t, "w1 asked again", func() bool {
		return w1.requests.Load() > n && !second.Status().Witnesses[0].LastSuccess.IsZero()
	})
	// keep runs right after the answer is tallied: give it a moment to
	// add the second line (a fixed Cosigner never does; then this waits
	// the whole second).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Count(string(second.Latest()), "— witness.example/w1 ") > 1 {
			break
		}
	}
	if got := strings.Count(string(second.Latest()), "— witness.example/w1 "); got != 1 {
		t.Errorf("the cosigned checkpoint carries %d cosignatures by witness.example/w1:\n%s", got, second.Latest())
	}
}
