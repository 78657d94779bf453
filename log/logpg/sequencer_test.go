package logpg_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/jackc/pgx/v5"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/server"
)

type keyPair struct {
	s note.Signer
	v note.Verifier
}

func newKey(t *testing.T, origin string) keyPair {
	skey, vkey, err := note.GenerateKey(nil, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	return keyPair{s, v}
}

func openSeq(t *testing.T, dsn string, k keyPair) (*server.Sequencer, *logpg.Store) {
	t.Helper()
	return openSeqWith(t, dsn, k, nil)
}

// openSeqWith is openSeq with the store's options o.
func openSeqWith(t *testing.T, dsn string, k keyPair, o *logpg.Options) (*server.Sequencer, *logpg.Store) {
	t.Helper()
	return openSeqOpts(t, dsn, k, o, &server.SequencerOptions{})
}

// openSeqOpts is openSeqWith with the sequencer's options so (a Genesis
// is set if so has none).
func openSeqOpts(t *testing.T, dsn string, k keyPair, o *logpg.Options, so *server.SequencerOptions) (*server.Sequencer, *logpg.Store) {
	t.Helper()
	st, err := logpg.Open(t.Context(), dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	if so.Genesis == nil {
		so.Genesis = func() ([]byte, error) { return []byte("genesis"), nil }
	}
	seq, err := server.OpenSequencer(t.Context(), st, k.s, k.v, so)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close(); st.Close() })
	return seq, st
}

// TestSequencersShareALog: sequencers in front of two handles append at
// once; every receipt verifies, one genesis is written, no index is given
// twice, and every checkpoint either hands out is consistent with the
// final tree.
func TestSequencersShareALog(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/shared")
	a, sa := openSeq(t, dsn, k)
	b, sb := openSeq(t, dsn, k)
	seqs := []*server.Sequencer{a, b}
	const workers, each = 8, 40
	var mu sync.Mutex
	var receipts []*log.Receipt
	var wg sync.WaitGroup
	for w := range 2 * workers {
		wg.Go(func() {
			for i := range each {
				r, err := seqs[w%2].Append(context.Background(), fmt.Appendf(nil, "w%d e%d", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				receipts = append(receipts, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st, err := sa.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + 2*workers*each); st.Size != want {
		t.Fatalf("size %d, want %d (one genesis and every append)", st.Size, want)
	}
	checkReceipts(t, sb, k.v, st, receipts)
	es, err := sb.Entries(t.Context(), 0, 2)
	if err != nil || string(es[0]) != "genesis" || string(es[1]) == "genesis" {
		t.Fatalf("first entries %q, %v: want one genesis", es, err)
	}
	// Both sequencers' latest checkpoints follow the shared log.
	for i, s := range seqs {
		if size, _ := s.Checkpoint(); size > st.Size {
			t.Errorf("sequencer %d: checkpoint size %d past the log's %d", i, size, st.Size)
		}
	}
}

// TestAppendFenced: of two fenced appends decided on the same size, under
// the same key, through two sequencers, exactly one is written.
func TestAppendFenced(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/fenced")
	a, _ := openSeq(t, dsn, k)
	b, sb := openSeq(t, dsn, k)
	size, _ := a.Checkpoint()
	var wins, fenced int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range []*server.Sequencer{a, b, a, b} {
		wg.Go(func() {
			_, err := s.AppendFenced(context.Background(), fmt.Appendf(nil, "accept %d", i), log.Fence{Key: "task-1", After: size})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, log.ErrFenced):
				fenced++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || fenced != 3 {
		t.Fatalf("%d won and %d were fenced, want 1 and 3", wins, fenced)
	}
	st, _ := sb.Latest(t.Context())
	if st.Size != size+1 {
		t.Fatalf("size %d, want %d", st.Size, size+1)
	}
}

// TestForeignKeyRefused: a sequencer whose key did not sign the stored
// log does not start.
func TestForeignKeyRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	openSeq(t, dsn, newKey(t, "provlog.test/one"))
	st, err := logpg.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other := newKey(t, "provlog.test/other")
	if seq, err := server.OpenSequencer(t.Context(), st, other.s, other.v, nil); err == nil {
		seq.Close()
		t.Fatal("a sequencer with another key opened the log")
	}
	_ = bytes.Equal
}

// TestOnCommit: each commit that writes a batch reports its parts, which
// add up to no more than the commit took, with the batch's entries.
func TestOnCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	k := newKey(t, "provlog.test/oncommit")
	var mu sync.Mutex
	var got []logpg.CommitTimes
	st, err := logpg.Open(t.Context(), dsn, &logpg.Options{OnCommit: func(ct logpg.CommitTimes) {
		mu.Lock()
		got = append(got, ct)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	seq, err := server.OpenSequencer(t.Context(), st, k.s, k.v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return []byte("genesis"), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for i := range 3 {
		t0 := time.Now()
		if _, err := seq.Append(t.Context(), fmt.Appendf(nil, "entry %d", i)); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		sum := last.Wait + last.Lock + last.Build + last.Write
		// In one round trip (one sequencer on the log, appends back to
		// back) there is no round trip 1; else there is.
		if last.Entries != 1 || last.OneTrip != (last.Lock == 0) || last.Write <= 0 || sum > took || last.End.Before(t0) {
			t.Fatalf("append %d (took %v): commit times %+v", i, took, last)
		}
	}
	if len(got) != 4 { // the genesis and three appends
		t.Fatalf("%d commits reported, want 4", len(got))
	}
}

// TestStatementTimeoutPasses: a commit cut by statement_timeout while
// another session holds the state row's lock fails its appends as the
// log's database being unavailable, and the log goes on once the lock is
// released. It stopped the log for good ("log stopped after a failed
// commit"), though nothing was written.
func TestStatementTimeoutPasses(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("options", q.Get("options")+" -c statement_timeout=200")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	k := newKey(t, "provlog.test/timeout")
	seq, _ := openSeq(t, u.String(), k)
	if _, err := seq.Append(t.Context(), []byte("before")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT size FROM provlog_state FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var refused int
	for i := range 4 {
		if _, err := seq.Append(ctx, fmt.Appendf(nil, "held-%d", i)); err != nil {
			if !errors.Is(err, log.ErrUnavailable) {
				t.Fatalf("an append cut by statement_timeout: %v, want it unavailable", err)
			}
			refused++
		}
	}
	tx.Rollback(ctx)
	if refused == 0 {
		t.Fatal("no append met the timeout; the test shows nothing")
	}
	if err := seq.Err(); err != nil {
		t.Fatalf("the log stopped: %v", err)
	}
	if _, err := seq.Append(ctx, []byte("after")); err != nil {
		t.Fatalf("an append once the lock was released: %v", err)
	}
}

// TestStopSaysRestart: a commit the database refuses for good (a row
// inserted by hand where the next entry goes) stops the log; the failed
// append, the appends refused after it and Err say that the log stopped
// and that provlog is to be restarted, not that the store is unavailable,
// while a refused append still matches log.ErrUnavailable (nothing
// written), which the task engine goes by. They said "append refused: log
// store is unavailable: log stopped after a failed commit", which reads
// as passing by itself.
func TestStopSaysRestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	seq, _ := openSeq(t, dsn, newKey(t, "provlog.test/stop"))
	ctx := t.Context()
	size, _ := seq.Checkpoint()
	pgtest.Psql(t, dsn, fmt.Sprintf(`INSERT INTO provlog_entries (idx, entry) VALUES (%d, 'by hand')`, size))
	_, failed := seq.Append(ctx, []byte("meets the row"))
	_, refused := seq.Append(ctx, []byte("after the stop"))
	for _, c := range []struct {
		what string
		err  error
	}{{"the failed append", failed}, {"an append after the stop", refused}, {"Err", seq.Err()}} {
		if c.err == nil || !strings.Contains(c.err.Error(), "log stopped; restart provlog once what follows is fixed") || strings.Contains(c.err.Error(), log.ErrUnavailable.Error()) {
			t.Errorf("%s: %v; want it to say that the log stopped and to restart provlog, not that the store is unavailable", c.what, c.err)
		}
	}
	if !errors.Is(refused, log.ErrUnavailable) || !strings.HasPrefix(refused.Error(), "append refused, nothing written: ") {
		t.Errorf("an append after the stop: %v; want it refused, nothing written (log.ErrUnavailable)", refused)
	}
}

// TestFencedAmongCalls: fenced appends (task entries) and plain ones
// (calls) at once, from many goroutines, all go through. A commit of a
// fenced append took in the plain appends queued while it waited for the
// lock, more entries than the fences it gave the store, which refused
// the batch and stopped the log.
func TestFencedAmongCalls(t *testing.T) {
	seq, _ := openSeq(t, pgtest.DSN(t), newKey(t, "provlog.test/mixed"))
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				size, _ := seq.Checkpoint()
				if _, err := seq.AppendFenced(t.Context(), fmt.Appendf(nil, "task %d %d", w, i), log.Fence{Key: fmt.Sprintf("task-%d-%d", w, i), After: size}); err != nil {
					t.Error(err)
					return
				}
				for j := range 3 {
					if _, err := seq.Append(t.Context(), fmt.Appendf(nil, "call %d %d %d", w, i, j)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
