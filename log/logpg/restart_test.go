package logpg_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/server"
	"golang.org/x/mod/sumdb/note"
)

// TestRestartUnderLoad: PostgreSQL stopped at once (pg_ctl stop -m
// immediate, WAL left unflushed as long as it can be) and started again
// while two sequencers append through their own handles. Appends fail
// while it is down, saying the store is unavailable, and go through again
// once it is back; no index is handed out twice, every receipt handed out
// verifies and its checkpoint is a prefix of the final tree, and both
// sequencers end on the database's checkpoint.
func TestRestartUnderLoad(t *testing.T) {
	c := pgtest.NewCluster(t, logpg.QuietWAL...)
	k := newKey(t, "provlog.test/restart")
	a, sa := openSeq(t, c.DSN, k)
	b, sb := openSeq(t, c.DSN, k)
	seqs := []*server.Sequencer{a, b}
	var (
		mu       sync.Mutex
		receipts []*log.Receipt
		failed   int
		phase    atomic.Int32 // 0 before the stop, 1 restarted
		after    atomic.Int32 // receipts since the restart
		wg       sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; after.Load() < 200; i++ {
				r, err := seqs[w%2].Append(context.Background(), fmt.Appendf(nil, "w%d e%d", w, i))
				mu.Lock()
				switch {
				case err == nil:
					receipts = append(receipts, r)
					if phase.Load() == 1 {
						after.Add(1)
					}
				case errors.Is(err, log.ErrUnavailable):
					failed++
				default:
					t.Errorf("append through sequencer %d: %v", w%2, err)
					after.Store(200)
				}
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := len(receipts)
		mu.Unlock()
		if n >= 300 {
			break
		}
		a.Checkpoint() // wait for the load to build up
	}
	c.Stop("immediate")
	c.Start()
	phase.Store(1)
	wg.Wait()
	if t.Failed() {
		return
	}

	check, err := logpg.Open(t.Context(), c.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	st, err := check.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checkReceipts(t, check, k.v, st, receipts)
	for i, s := range seqs {
		// Pooled connections the restart cut and nothing used since are
		// found dead by the commit's first round trip, which writes
		// nothing, and the commit takes another: the append goes
		// through at once.
		if _, err := s.Append(context.Background(), []byte("last")); err != nil {
			t.Fatalf("sequencer %d after the restart: %v", i, err)
		}
	}
	st, _ = check.Latest(t.Context())
	for i, s := range seqs {
		// Each follows what its store reads.
		if _, err := []*logpg.Store{sa, sb}[i].Latest(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, cp := s.Checkpoint(); string(cp) != string(st.Checkpoint) {
			t.Fatalf("sequencer %d ends on another checkpoint of size %d", i, st.Size)
		}
	}
	t.Logf("%d receipts (%d after the restart), %d appends refused while PostgreSQL was down, final size %d", len(receipts), after.Load(), failed, st.Size)
}

// checkReceipts checks receipts handed out against st, the final state of
// the log s holds: no index twice, each receipt's proof verifies, its
// checkpoint is a prefix of st's, and the stored entry is the one it was
// given for.
func checkReceipts(t *testing.T, s *logpg.Store, v note.Verifier, st log.State, receipts []*log.Receipt) {
	t.Helper()
	final, _, err := log.OpenCheckpoint(st.Checkpoint, v)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, r := range receipts {
		if seen[r.Index] {
			t.Fatalf("index %d handed out twice", r.Index)
		}
		seen[r.Index] = true
		cp, _, err := log.OpenCheckpoint(r.Checkpoint, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.VerifyInclusion(r.Index, cp.Size, r.Extra, r.Proof, cp.Hash); err != nil {
			t.Fatalf("receipt for %d: %v", r.Index, err)
		}
		p, err := log.ProveConsistency(t.Context(), s, cp.Size, final.Size)
		if err != nil {
			t.Fatalf("receipt for %d at size %d, final size %d: %v", r.Index, cp.Size, final.Size, err)
		}
		if err := log.VerifyConsistency(cp.Size, final.Size, p, cp.Hash, final.Hash); err != nil {
			t.Fatalf("receipt for %d: its checkpoint (size %d) is not a prefix of the final tree: %v", r.Index, cp.Size, err)
		}
		es, err := s.Entries(t.Context(), r.Index, r.Index+1)
		if err != nil || !bytes.Equal(log.LeafHash(es[0]), r.Extra) {
			t.Fatalf("receipt for %d: the stored entry is not the one acknowledged (%v)", r.Index, err)
		}
	}
}
