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

// TestReadOfUnchangedStateFlushesNothing: a read of the newest state that
// finds the state the handle holds waits for no WAL flush, even while
// another database of the cluster leaves WAL unflushed (asynchronous
// commits), whose flush it would otherwise wait for: the cluster counts
// no WAL sync for such reads. (A read that finds a newer state still
// flushes: TestAcknowledgedIsFlushed.)
func TestReadOfUnchangedStateFlushesNothing(t *testing.T) {
	c := pgtest.NewCluster(t, quietWAL...)
	ctx := t.Context()
	s := open(t, c.DSN)
	commitShared(t, s, "flushed", 3)
	if _, err := s.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE DATABASE other`} {
		if _, err := other.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	other.Close(ctx)
	cfg, err := pgx.ParseConfig(c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "other"
	if other, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET synchronous_commit = off`, `CREATE TABLE busy (x int)`} {
		if _, err := other.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	syncs := func() (n int64) {
		if err := other.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The pool's backends report their WAL statistics when they end.
	s.Close()
	s = open(t, c.DSN)
	if _, err := s.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	const reads = 40
	before, unflushed := syncs(), 0
	for range reads {
		var behind bool
		if err := other.QueryRow(ctx, `WITH w AS (INSERT INTO busy VALUES (1)) SELECT 1`).Scan(new(int)); err != nil {
			t.Fatal(err)
		}
		if err := other.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()`).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if behind {
			unflushed++
		}
		if _, err := s.Latest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if unflushed < reads/2 {
		t.Fatalf("the other database's asynchronous commits left the WAL unflushed before only %d of %d reads", unflushed, reads)
	}
	// A flush of the other database's WAL would be one sync a read; the
	// WAL writer and the handle's open may add a few.
	if got := syncs() - before; got >= int64(unflushed)/2 {
		t.Fatalf("%d reads of an unchanged state, %d of them with another database's WAL unflushed, made %d WAL syncs", reads, unflushed, got)
	}
}
