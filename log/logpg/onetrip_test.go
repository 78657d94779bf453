package logpg

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// deaf stops s's LISTEN refresh, so that s learns of other writers'
// commits only when it commits or reads past what it knows. It also lets
// s commit in one round trip on a connection however long idle, so that
// a slow test machine does not decide.
func deaf(s *Store) {
	s.stop()
	s.follow.Wait()
	s.maxIdle = time.Hour
}

// TestOneTripRefused: a handle that does not know another writer's commit
// builds on its own state and sends it in one round trip; the server
// refuses it under the lock and nothing of it is written; the handle
// builds again on the newest state, commits in two round trips, and goes
// back to one round trip once a commit finds no other writer's.
func TestOneTripRefused(t *testing.T) {
	a, b, _ := twoWriters(t)
	deaf(b)
	var trips []bool
	b.onCommit = func(ct CommitTimes) { trips = append(trips, ct.OneTrip) }
	ctx := t.Context()
	commitShared(t, a, "a", 3)

	var built []uint64
	try := 0
	err := b.CommitShared(ctx, nil, func(st log.State, _ []bool) (*log.Batch, error) {
		built = append(built, st.Size)
		try++
		return buildOn(t, st, fmt.Sprintf("b try %d", try), 2), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(built) != "[0 3]" {
		t.Fatalf("built on sizes %v, want [0 3] (its own state, then the newest)", built)
	}
	if _, err := a.LeafIndex(ctx, log.LeafHash([]byte("b try 1 0 at 0"))); !errors.Is(err, log.ErrNotFound) {
		t.Fatalf("the refused batch's entry: %v, want ErrNotFound", err)
	}
	if st, _ := a.Latest(ctx); st.Size != 5 {
		t.Fatalf("size %d, want 5", st.Size)
	}
	if es, err := a.Entries(ctx, 3, 5); err != nil || string(es[1]) != "b try 2 1 at 3" {
		t.Fatalf("entries [3, 5): %q, %v", es, err)
	}
	commitShared(t, b, "b again", 1)
	commitShared(t, b, "b once more", 1)
	if fmt.Sprint(trips) != "[false false true]" {
		t.Fatalf("commits in one round trip: %v, want [false false true]", trips)
	}
}

// TestOneTripFenced: a commit in one round trip assumes no fence tripped;
// the server checks, and if one did, refuses, and the commit in two round
// trips that follows fences the append off.
func TestOneTripFenced(t *testing.T) {
	a, b, dsn := twoWriters(t)
	deaf(b)
	ctx := t.Context()
	fenced := func(s *Store, fences []log.Fence) []string {
		var calls []string
		err := s.CommitShared(ctx, fences, func(st log.State, fenced []bool) (*log.Batch, error) {
			calls = append(calls, fmt.Sprint(st.Size, fenced))
			n := 0
			for _, f := range fenced {
				if !f {
					n++
				}
			}
			return buildOn(t, st, "k", n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return calls
	}
	if got := fenced(a, []log.Fence{{Key: "t1"}}); fmt.Sprint(got) != "[0 [false]]" {
		t.Fatalf("first append: builds %v", got)
	}
	if _, err := b.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	// b knows the newest state, so it tries one round trip, assuming t1's
	// fence holds; it does not (t1 was appended at 0).
	got := fenced(b, []log.Fence{{Key: "t1", After: 0}, {Key: "t2"}})
	if fmt.Sprint(got) != "[1 [false false] 1 [true false]]" {
		t.Fatalf("builds %v, want one on [false false], then one on [true false]", got)
	}
	if got := pgtest.Psql(t, dsn, `SELECT string_agg(key || '=' || last, ',' ORDER BY key) FROM provlog_keys`); got != "t1=0,t2=1" {
		t.Fatalf("keys = %s", got)
	}
}

// TestOneTripWhen: a handle tries one round trip only while appends come
// one at a time (its last commit carried one entry), no other writer has
// announced a commit past its state, and its connection was in use
// lately.
func TestOneTripWhen(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	defer s.Close()
	deaf(s)
	var trips []bool
	s.onCommit = func(ct CommitTimes) { trips = append(trips, ct.OneTrip) }
	commitShared(t, s, "three", 3)
	commitShared(t, s, "after three", 1)
	st := commitShared(t, s, "one", 1)
	s.heard.Store(st.Size + 1) // as the LISTEN connection does
	commitShared(t, s, "another writer announced", 1)
	commitShared(t, s, "past it", 1)
	s.maxIdle = 0 // every connection has been idle too long
	commitShared(t, s, "idle", 1)
	if fmt.Sprint(trips) != "[true false true false true false]" {
		t.Fatalf("commits in one round trip: %v, want [true false true false true false]", trips)
	}
}

// TestHeard: a handle's LISTEN connection records the sizes other
// writers' commits announce. (b listens once its connection is up: a
// commits until b has heard one.)
func TestHeard(t *testing.T) {
	a, b, _ := twoWriters(t)
	for try := 0; ; try++ {
		st := commitShared(t, a, fmt.Sprintf("announced %d", try), 1)
		if b.heard.Load() >= st.Size {
			return
		}
		if try == 500 {
			t.Fatalf("b heard size %d after 500 commits", b.heard.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
