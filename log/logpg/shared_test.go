package logpg

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// buildOn returns a batch of n entries named by tag on top of st, as a
// sequencer builds it.
func buildOn(t testing.TB, st log.State, tag string, n int) *log.Batch {
	t.Helper()
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, st.Size, cloneHashes(st.Range))
	if err != nil {
		t.Fatal(err)
	}
	b := &log.Batch{Start: st.Size}
	for i := range n {
		e := fmt.Appendf(nil, "%s %d at %d", tag, i, st.Size)
		lh := log.LeafHash(e)
		b.Entries = append(b.Entries, e)
		b.LeafHashes = append(b.LeafHashes, lh)
		if err := rng.Append(lh, func(id compact.NodeID, h []byte) { b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: bytes.Clone(h)}) }); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := rng.GetRootHash(nil)
	b.State = log.State{Size: rng.End(), Range: cloneHashes(rng.Hashes()), Checkpoint: fmt.Appendf(nil, "cp %d %x\n", rng.End(), root)}
	return b
}

func commitShared(t testing.TB, s *Store, tag string, n int) log.State {
	t.Helper()
	var got log.State
	err := s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
		b := buildOn(t, st, tag, n)
		got = b.State
		return b, nil
	})
	if err != nil {
		t.Fatalf("CommitShared(%s): %v", tag, err)
	}
	return got
}

// TestTwoWriters: a batch built before another writer committed is
// refused and writes nothing; CommitShared builds on whatever is stored,
// and each handle reads what the other wrote.
func TestTwoWriters(t *testing.T) {
	a, b, _ := twoWriters(t)
	ctx := t.Context()

	stale, _ := b.State(ctx)
	commitShared(t, a, "a", 3)
	err := b.Commit(ctx, buildOn(t, stale, "b", 2))
	if err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("Commit of a batch built on a stale state = %v, want a refusal naming another writer", err)
	}
	if st, _ := a.Latest(ctx); st.Size != 3 {
		t.Fatalf("after the refusal the log has size %d, want 3", st.Size)
	}
	st := commitShared(t, b, "b", 2)
	if st.Size != 5 {
		t.Fatalf("b committed up to %d, want 5", st.Size)
	}
	es, err := a.Entries(ctx, 3, 5)
	if err != nil || string(es[0]) != "b 0 at 3" {
		t.Fatalf("a reads b's entries: %q, %v", es, err)
	}
	if idx, err := a.LeafIndex(ctx, log.LeafHash([]byte("b 1 at 3"))); err != nil || idx != 4 {
		t.Fatalf("a.LeafIndex(b's entry) = %d, %v; want 4", idx, err)
	}
	p, err := log.ProveInclusion(ctx, a, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, st.Size, st.Range)
	rh, _ := root.GetRootHash(nil)
	if err := log.VerifyInclusion(4, 5, log.LeafHash([]byte("b 1 at 3")), p, rh); err != nil {
		t.Fatalf("a's proof of b's entry: %v", err)
	}
}

// TestManyWriters: handles committing at once, from goroutines, each
// lose no batch and never fork the tree.
func TestManyWriters(t *testing.T) {
	dsn := pgtest.DSN(t)
	const handles, rounds = 3, 30
	var wg sync.WaitGroup
	stores := make([]*Store, handles)
	for i := range stores {
		stores[i] = open(t, dsn)
		defer stores[i].Close()
	}
	var mu sync.Mutex
	seen := map[uint64][]byte{} // size -> checkpoint
	for i, s := range stores {
		for g := range 2 {
			wg.Go(func() {
				for r := range rounds {
					st := commitShared(t, s, fmt.Sprintf("h%d g%d r%d", i, g, r), 1+r%5)
					mu.Lock()
					if _, dup := seen[st.Size]; dup {
						t.Errorf("two commits ended at size %d", st.Size)
					}
					seen[st.Size] = st.Checkpoint
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	st, err := stores[0].Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(0)
	for r := range rounds {
		want += uint64(handles * 2 * (1 + r%5))
	}
	if st.Size != want {
		t.Fatalf("size %d, want %d", st.Size, want)
	}
	es, err := stores[1].Entries(t.Context(), 0, st.Size)
	if err != nil {
		t.Fatal(err)
	}
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	for _, e := range es {
		rng.Append(log.LeafHash(e), nil)
	}
	for i, h := range rng.Hashes() {
		if !bytes.Equal(h, st.Range[i]) {
			t.Fatal("the stored compact range is not the tree of the stored entries")
		}
	}
	for size, cp := range seen {
		got, err := stores[2].Checkpoint(t.Context(), size)
		if err != nil || !bytes.Equal(got, cp) {
			t.Errorf("checkpoint %d: %q, %v; want the committer's", size, got, err)
		}
	}
}

// TestForkRefused: a stored state that does not extend what a handle saw
// committed fails the handle closed.
func TestForkRefused(t *testing.T) {
	a, b, dsn := twoWriters(t)
	commitShared(t, a, "a", 4)
	if _, err := b.Latest(t.Context()); err != nil {
		t.Fatal(err)
	}
	commitShared(t, a, "a2", 2)
	// Someone rewrites the stored compact range: a tree that is not the
	// one b saw grow (whether or not b learnt of a2 already).
	evil := sha256.Sum256([]byte("evil"))
	pgtest.Psql(t, dsn, fmt.Sprintf(`UPDATE provlog_state SET compact = overlay(compact placing '\x%x' from 1 for 32)`, evil[:]))
	// b may first build on the state it knows (one round trip), which the
	// server then finds is not the stored one; never on the forged one.
	err := b.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
		for _, h := range st.Range {
			if bytes.Equal(h, evil[:]) {
				t.Fatal("build called on a forked state")
			}
		}
		return buildOn(t, st, "b", 1), nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("CommitShared on a forked store = %v, want ErrCorrupt", err)
	}
	if err := b.CommitShared(t.Context(), nil, func(log.State, []bool) (*log.Batch, error) { return nil, nil }); err == nil {
		t.Fatal("a failed handle committed again")
	}
}

// TestFences: an append fenced on a key is committed only if no entry
// under the key was committed at or after the fence.
func TestFences(t *testing.T) {
	a, b, dsn := twoWriters(t)
	ctx := t.Context()
	keyed := func(s *Store, fences []log.Fence) []bool {
		var got []bool
		err := s.CommitShared(ctx, fences, func(st log.State, fenced []bool) (*log.Batch, error) {
			got = fenced
			n := 0
			for _, f := range fenced {
				if !f {
					n++
				}
			}
			if n == 0 {
				return nil, nil
			}
			return buildOn(t, st, "k", n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := keyed(a, []log.Fence{{Key: "t1"}, {Key: "t2"}, {}}); fmt.Sprint(got) != "[false false false]" {
		t.Fatalf("first appends fenced: %v", got)
	}
	// b decided on a log of size 3 (t1's entry at 0 included): it may
	// write t1 again; a decision taken at size 0 may not.
	if got := keyed(b, []log.Fence{{Key: "t1", After: 1}, {Key: "t2", After: 0}, {Key: "t3", After: 0}}); fmt.Sprint(got) != "[false true false]" {
		t.Fatalf("fences = %v, want [false true false]", got)
	}
	// Two appends under one key in one commit: the second is fenced.
	if got := keyed(a, []log.Fence{{Key: "t4", After: 5}, {Key: "t4", After: 5}}); fmt.Sprint(got) != "[false true]" {
		t.Fatalf("fences = %v, want [false true]", got)
	}
	if got := pgtest.Psql(t, dsn, `SELECT string_agg(key || '=' || last, ',' ORDER BY key) FROM provlog_keys`); got != "t1=3,t2=1,t3=4,t4=5" {
		t.Fatalf("keys = %s", got)
	}
}

// TestLostConnection: a connection killed before COMMIT wrote nothing and
// says the store was unavailable; a reply lost after COMMIT is read back
// as committed. Either way the store goes on. So in one round trip and in
// two.
func TestLostConnection(t *testing.T) {
	for _, oneTrip := range []bool{true, false} {
		t.Run(fmt.Sprintf("oneTrip=%v", oneTrip), func(t *testing.T) { testLostConnection(t, oneTrip) })
	}
}

func testLostConnection(t *testing.T, oneTrip bool) {
	dsn := pgtest.DSN(t)
	s, killer := open(t, dsn), open(t, dsn)
	defer s.Close()
	defer killer.Close()
	ctx := t.Context()
	var trips []bool
	s.onCommit = func(ct CommitTimes) { trips = append(trips, ct.OneTrip) }
	s.testingOnlyTrips = 2
	if oneTrip {
		s.testingOnlyTrips = 1
	}
	commit := func(build func(log.State, []bool) (*log.Batch, error)) error {
		return s.CommitShared(ctx, nil, build)
	}
	if err := commit(func(st log.State, _ []bool) (*log.Batch, error) { return buildOn(t, st, "first", 2), nil }); err != nil {
		t.Fatal(err)
	}

	// The backend is killed once the commit's last round trip, COMMIT in
	// it, is on its way: the outcome is unknown until read back, and the
	// commit is not tried again on another connection (one build, one
	// write).
	var builds, writes int
	s.testingOnlyBeforeWrite = func(pid uint32) {
		writes++
		if _, err := killer.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)); err != nil {
			t.Errorf("pg_terminate_backend: %v", err)
		}
	}
	err := commit(func(st log.State, _ []bool) (*log.Batch, error) { builds++; return buildOn(t, st, "lost", 3), nil })
	if !errors.Is(err, log.ErrUnavailable) {
		t.Fatalf("commit on a killed connection = %v, want ErrUnavailable", err)
	}
	if builds != 1 || writes != 1 {
		t.Fatalf("the commit killed after it sent COMMIT was built %d times and written %d, want once (not tried again)", builds, writes)
	}
	s.testingOnlyBeforeWrite = nil
	if st, _ := killer.Latest(ctx); st.Size != 2 {
		t.Fatalf("after the killed commit the log has size %d, want 2", st.Size)
	}

	s.testingOnlyAfterWrite = func() error { return errors.New("connection reset (injected after COMMIT)") }
	var want log.State
	err = commit(func(st log.State, _ []bool) (*log.Batch, error) {
		b := buildOn(t, st, "reply lost", 3)
		want = b.State
		return b, nil
	})
	s.testingOnlyAfterWrite = nil
	if err != nil {
		t.Fatalf("commit whose reply was lost = %v, want nil (read back as committed)", err)
	}
	if st, _ := s.State(ctx); st.Size != 5 || !bytes.Equal(st.Checkpoint, want.Checkpoint) {
		t.Fatalf("state after the read-back: size %d", st.Size)
	}
	if err := commit(func(st log.State, _ []bool) (*log.Batch, error) { return buildOn(t, st, "after", 1), nil }); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]bool{oneTrip, oneTrip, oneTrip}); fmt.Sprint(trips) != want {
		t.Fatalf("commits in one round trip: %v, want %v", trips, want)
	}

	// Killed, and another writer commits past the batch's size before
	// the read-back: not committed (no checkpoint at its size), not
	// corrupt.
	builds, writes = 0, 0
	s.testingOnlyBeforeWrite = func(pid uint32) {
		writes++
		if _, err := killer.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)); err != nil {
			t.Errorf("pg_terminate_backend: %v", err)
		}
		commitShared(t, killer, "past it", 5)
	}
	err = commit(func(st log.State, _ []bool) (*log.Batch, error) { builds++; return buildOn(t, st, "spanned", 2), nil })
	s.testingOnlyBeforeWrite = nil
	if !errors.Is(err, log.ErrUnavailable) {
		t.Fatalf("commit on a killed connection, another writer's batch spanning its size = %v, want ErrUnavailable", err)
	}
	if builds != 1 || writes != 1 {
		t.Fatalf("the commit killed after it sent COMMIT (another writer's batch spanning its size) was built %d times and written %d, want once", builds, writes)
	}
	if err := commit(func(st log.State, _ []bool) (*log.Batch, error) { return buildOn(t, st, "last", 1), nil }); err != nil {
		t.Fatal(err)
	}
	if st, _ := killer.Latest(ctx); st.Size != 12 {
		t.Fatalf("size %d, want 12", st.Size)
	}
}
