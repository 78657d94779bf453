package logpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestFrozenDatabaseRefusesAppends: a database that stops answering (a
// hung host, a partition that drops packets) with the sidecar's
// connections still open must not hang every append for as long as it
// lasts. DESIGN §2: a call whose call entry cannot be written (storage
// failure) is refused and never forwarded; logpg's own bound for a
// database that cannot be reached is Options.ResolveTimeout. Before, an
// append on a store opened with ResolveTimeout 3s was still waiting 20s
// after the database froze, and the sequencer reported nothing wrong
// (Unavailable and Err nil): the sidecar's calls hung, /healthz said
// "ok", and the agent's client timed out not knowing whether its call ran.
//
// Found by the pgprobe session: three sidecars under load with every
// process of their PostgreSQL cluster SIGSTOPped for 43s answered no call
// (clients timed out at 30s), /healthz said status ok, storage ok
// throughout; calls the downstream had already run got no answer (their
// results' flush hung), so their clients gave up not knowing they had run.
// Now each commit's round trips are bounded by ResolveTimeout.
func TestFrozenDatabaseRefusesAppends(t *testing.T) {
	c := pgtest.NewCluster(t)
	seq, st := openSeqWith(t, c.DSN, newKey(t, "provlog.test/frozen"), &logpg.Options{ResolveTimeout: 3 * time.Second})
	if _, err := seq.Append(context.Background(), []byte("before")); err != nil {
		t.Fatal(err)
	}
	thaw := c.Freeze()
	done := make(chan error, 1)
	go func() {
		_, err := seq.Append(context.Background(), []byte("while frozen"))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an append succeeded while the database was frozen")
		}
		t.Logf("refused while frozen: %v", err)
	case <-time.After(20 * time.Second):
		t.Errorf("an append is still waiting 20s after the database froze (store ResolveTimeout 3s); Unavailable() = %v, Err() = %v", seq.Unavailable(), st.Err())
		thaw()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
	if seq.Unavailable() == nil && st.Err() == nil {
		t.Error("the refusal left the sequencer reporting nothing wrong (health would say ok)")
	}
	thaw()
}
