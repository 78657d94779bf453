package logpg

import (
	"fmt"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestAcknowledgedIsFlushedWhenServerCommitsAsync: a server (or database,
// or role) configured with synchronous_commit = off, a common tuning, must
// not void "nothing is acknowledged before it is durable". The flush after
// a commit waits for the WAL only "as synchronous_commit is configured"
// (schema.go, Durability), so with it off the flush returns at once, the
// commit is acknowledged (a receipt handed out, the call forwarded) and
// an immediate stop loses it: the log restarts at a smaller size and the
// next writer signs a different checkpoint for the size handed out.
//
// Found by the pgprobe session against three real sidecars: with
// `ALTER DATABASE … SET synchronous_commit = off` and pg_ctl restart -m
// immediate under load, two downstream side effects had no call entry
// and clients held receipts for size 31416 whose root the log no longer
// had (the other sidecars signed a second checkpoint of that size).
// Fails on main.
func TestAcknowledgedIsFlushedWhenServerCommitsAsync(t *testing.T) {
	c := pgtest.NewCluster(t, append(quietWAL[:len(quietWAL):len(quietWAL)], "synchronous_commit=off")...)
	ctx := t.Context()
	for round := range 2 {
		a := open(t, c.DSN)
		// Round 0 commits in one round trip, round 1 in two.
		a.testingOnlyTrips = 1 + round
		want := commitShared(t, a, fmt.Sprintf("acked %d", round), 3)
		c.Stop("immediate")
		a.Close()
		c.Start()
		s := open(t, c.DSN)
		st, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if st.Size < want.Size {
			t.Fatalf("round %d: with synchronous_commit=off on the server, a commit acknowledged at size %d was lost by an immediate stop: the log restarted at size %d", round, want.Size, st.Size)
		}
	}
}
