package logpg

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

// quietWAL are server settings under which WAL that no one flushes stays
// in PostgreSQL's memory for seconds: the WAL writer and the background
// writer all but idle, no checkpoint. Stopping such a server at once
// (pg_ctl stop -m immediate) loses what a flush did not cover.
var quietWAL = []string{"wal_writer_delay=10000", "wal_writer_flush_after=0", "bgwriter_lru_maxpages=0", "checkpoint_timeout=3600"}

// TestAcknowledgedIsFlushed: a commit's transaction commits without
// waiting for the WAL flush, so that the state row's lock is not held
// through it; the flush after it is what makes it durable. A commit that
// returned survives PostgreSQL stopped at once, and so does a state
// another handle read with Latest, even if its writer's flush never ran.
func TestAcknowledgedIsFlushed(t *testing.T) {
	c := pgtest.NewCluster(t, quietWAL...)
	ctx := t.Context()
	for round := range 2 {
		a, b := open(t, c.DSN), open(t, c.DSN)
		// Round 0 commits in one round trip, round 1 in two.
		a.testingOnlyTrips = 1 + round
		want := commitShared(t, a, fmt.Sprintf("acked %d", round), 1)
		a.testingOnlySkipFlush = true
		commitShared(t, a, fmt.Sprintf("unflushed %d", round), 1)
		read, err := b.Latest(ctx)
		if err != nil {
			t.Fatalf("Latest: %v", err)
		}
		if read.Size != want.Size+1 {
			t.Fatalf("round %d: Latest read size %d, want %d", round, read.Size, want.Size+1)
		}
		c.Stop("immediate")
		a.Close()
		b.Close()
		c.Start()
		s := open(t, c.DSN)
		st, err := s.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size < read.Size {
			t.Fatalf("round %d: after an immediate stop the log has size %d: lost the state of size %d (acknowledged %d) that a handle read", round, st.Size, read.Size, want.Size)
		}
		s.Close()
	}
}

// TestReadOfDurableStateWritesNothing: reading the newest state (Latest,
// which get_task_status runs on a shared log) flushes what it read only
// if it may not be durable yet; on a quiet log, whose WAL is flushed, it
// writes no WAL (and waits for no flush). A cluster of its own, so that
// no other test writes WAL meanwhile.
func TestReadOfDurableStateWritesNothing(t *testing.T) {
	c := pgtest.NewCluster(t, quietWAL...)
	ctx := t.Context()
	s := open(t, c.DSN)
	defer s.Close()
	commitShared(t, s, "flushed", 3)
	const reads = 20
	// The WAL's end, by a connection of its own (the pool's might run a
	// read's flush).
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	end := func() (lsn string) {
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	before := end()
	for range reads {
		if _, err := s.Latest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A flush writes at least 50 bytes (a message and its commit); the
	// server itself may write a record now and then.
	var wrote int64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint`, end(), before).Scan(&wrote); err != nil {
		t.Fatal(err)
	}
	if wrote >= reads*50 {
		t.Fatalf("%d reads of a flushed log wrote %d bytes of WAL", reads, wrote)
	}
}
