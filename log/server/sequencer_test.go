package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

func TestSequencerConcurrentAppends(t *testing.T) {
	const goroutines, perGoroutine = 64, 200
	ctx := context.Background()
	store := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/seq")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()

	receipts := make([][]*log.Receipt, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				r, err := seq.Append(ctx, fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i))
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				receipts[g] = append(receipts[g], r)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	const total = goroutines * perGoroutine
	size, cp := seq.Checkpoint()
	final, _, err := log.OpenCheckpoint(cp, verifier)
	if err != nil {
		t.Fatal(err)
	}
	if size != total || final.Size != total {
		t.Fatalf("final size %d (checkpoint %d), want %d", size, final.Size, total)
	}
	seen := make([]bool, total)
	roots := map[uint64][]byte{} // of every checkpoint a receipt carried
	for g, rs := range receipts {
		for i, r := range rs {
			entry := fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i)
			c, err := r.Verify(log.LeafHash(entry), verifier)
			if err != nil {
				t.Fatalf("receipt %d/%d: %v", g, i, err)
			}
			if r.Index >= total || seen[r.Index] {
				t.Fatalf("index %d handed out twice or out of range", r.Index)
			}
			seen[r.Index] = true
			if prev, ok := roots[c.Size]; ok && !bytes.Equal(prev, c.Hash) {
				t.Fatalf("two checkpoints of size %d with different roots", c.Size)
			}
			roots[c.Size] = c.Hash
			got, err := store.Entries(ctx, r.Index, r.Index+1)
			if err != nil || !bytes.Equal(got[0], entry) {
				t.Fatalf("entry %d = %q, %v; want %q", r.Index, got, err, entry)
			}
			if i > 0 && r.Index <= rs[i-1].Index {
				t.Fatalf("goroutine %d: index %d after %d", g, r.Index, rs[i-1].Index)
			}
		}
	}
	// Every receipt's checkpoint is a prefix of the final tree.
	for s, root := range roots {
		p, err := log.ProveConsistency(ctx, store, s, total)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.VerifyConsistency(s, total, p, root, final.Hash); err != nil {
			t.Fatalf("checkpoint %d is not consistent with the final one: %v", s, err)
		}
	}
	st := seq.Stats()
	if st.Appends != total || st.Commits == 0 || st.CommitErrors != 0 {
		t.Errorf("Stats = %+v", st)
	}
	t.Logf("%d appends in %d commits", st.Appends, st.Commits)
}

var errInjected = errors.New("injected commit failure")

// failingStore fails Commit, without writing anything, while fail is set.
type failingStore struct {
	log.Storage
	fail atomic.Bool
}

func (s *failingStore) Commit(ctx context.Context, b *log.Batch) error {
	if s.fail.Load() {
		return errInjected
	}
	return s.Storage.Commit(ctx, b)
}

func appendN(t *testing.T, seq *Sequencer, prefix string, n int) []*log.Receipt {
	t.Helper()
	rs := make([]*log.Receipt, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := seq.Append(context.Background(), fmt.Appendf(nil, "%s %d", prefix, i))
			if err != nil {
				t.Errorf("Append: %v", err)
			}
			rs[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return rs
}

func sameState(t *testing.T, got, want log.State) {
	t.Helper()
	if got.Size != want.Size || !bytes.Equal(got.Checkpoint, want.Checkpoint) || !slices.EqualFunc(got.Range, want.Range, bytes.Equal) {
		t.Fatalf("store state changed: size %d, want %d", got.Size, want.Size)
	}
}

func TestSequencerCommitFailure(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			inner, _ := b.open(t)
			store := &failingStore{Storage: inner}
			signer, verifier := logtest.NewKey(t, "provlog.test/fail")
			seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			appendN(t, seq, "good", 20)
			before, err := store.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			goodSize, goodCP := seq.Checkpoint()

			// The failing commit fails every append in it.
			store.fail.Store(true)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					if r, err := seq.Append(ctx, fmt.Appendf(nil, "lost %d", i)); !errors.Is(err, errInjected) {
						t.Errorf("Append during a failing commit = %v, %v; want the commit error", r, err)
					}
				})
			}
			wg.Wait()
			// Later appends fail with the same error, though the store
			// would now take them.
			store.fail.Store(false)
			if _, err := seq.Append(ctx, []byte("after")); !errors.Is(err, errInjected) {
				t.Errorf("Append after a failed commit: %v, want the sticky commit error", err)
			}
			if !errors.Is(seq.Err(), errInjected) {
				t.Errorf("Err() = %v", seq.Err())
			}
			if s, cp := seq.Checkpoint(); s != goodSize || !bytes.Equal(cp, goodCP) {
				t.Errorf("sequencer moved to size %d after failing", s)
			}
			after, err := store.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sameState(t, after, before)
			if _, err := store.Entries(ctx, goodSize, goodSize+1); !errors.Is(err, log.ErrNotFound) {
				t.Errorf("entry %d after the failed commit: %v, want ErrNotFound", goodSize, err)
			}
			if err := seq.Close(); err != nil {
				t.Fatal(err)
			}

			// A new sequencer resumes at the last good size.
			seq2, err := OpenSequencer(ctx, store, signer, verifier, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer seq2.Close()
			if s, cp := seq2.Checkpoint(); s != goodSize || !bytes.Equal(cp, goodCP) {
				t.Fatalf("reopened at size %d, want %d", s, goodSize)
			}
			r, err := seq2.Append(ctx, []byte("resumed"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Index != goodSize {
				t.Errorf("first append after reopening got index %d, want %d", r.Index, goodSize)
			}
			if _, err := r.Verify(log.LeafHash([]byte("resumed")), verifier); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSequencerGenesis(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, reopen := b.open(t)
			signer, verifier := logtest.NewKey(t, "provlog.test/genesis")
			calls := 0
			opts := &SequencerOptions{Genesis: func() ([]byte, error) {
				calls++
				return []byte(`{"kind":"genesis"}`), nil
			}}
			seq, err := OpenSequencer(ctx, store, signer, verifier, opts)
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := seq.Checkpoint(); s != 1 || calls != 1 {
				t.Fatalf("after genesis: size %d, %d calls", s, calls)
			}
			if e, err := store.Entries(ctx, 0, 1); err != nil || string(e[0]) != `{"kind":"genesis"}` {
				t.Fatalf("entry 0 = %q, %v", e, err)
			}
			if r, err := seq.Append(ctx, []byte("one")); err != nil || r.Index != 1 {
				t.Fatalf("Append after genesis: %v, %v", r, err)
			}
			seq.Close()

			// Not again on a store that has entries.
			store = reopen()
			seq, err = OpenSequencer(ctx, store, signer, verifier, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			if s, _ := seq.Checkpoint(); s != 2 || calls != 1 {
				t.Errorf("reopened: size %d, %d genesis calls, want 2 and 1", s, calls)
			}
		})
	}

	// A genesis that cannot be made stops the log from opening, and
	// nothing is written.
	store := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/genesis")
	_, err := OpenSequencer(ctx, store, signer, verifier, &SequencerOptions{Genesis: func() ([]byte, error) {
		return nil, errors.New("no genesis today")
	}})
	if err == nil || !strings.Contains(err.Error(), "no genesis today") {
		t.Errorf("OpenSequencer with a failing genesis: %v", err)
	}
	if st, _ := store.State(ctx); st.Size != 0 {
		t.Errorf("size %d after a failed genesis", st.Size)
	}
}

func TestSequencerReopen(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store, reopen := b.open(t)
			signer, verifier := logtest.NewKey(t, "provlog.test/reopen")
			seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, seq, "first", 100)
			size1, cp1 := seq.Checkpoint()
			if err := seq.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := seq.Append(ctx, []byte("closed")); !errors.Is(err, ErrClosed) {
				t.Errorf("Append after Close: %v, want ErrClosed", err)
			}

			store = reopen()
			seq, err = OpenSequencer(ctx, store, signer, verifier, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			if s, cp := seq.Checkpoint(); s != size1 || !bytes.Equal(cp, cp1) {
				t.Fatalf("reopened at size %d, want %d", s, size1)
			}
			rs := appendN(t, seq, "second", 100)
			for _, r := range rs {
				if r.Index < size1 {
					t.Fatalf("index %d reused after reopening", r.Index)
				}
			}
			size2, cp2 := seq.Checkpoint()
			if size2 != size1+100 {
				t.Fatalf("size %d, want %d", size2, size1+100)
			}
			c1, _, err := log.OpenCheckpoint(cp1, verifier)
			if err != nil {
				t.Fatal(err)
			}
			c2, _, err := log.OpenCheckpoint(cp2, verifier)
			if err != nil {
				t.Fatal(err)
			}
			p, err := log.ProveConsistency(ctx, store, size1, size2)
			if err != nil {
				t.Fatal(err)
			}
			if err := log.VerifyConsistency(size1, size2, p, c1.Hash, c2.Hash); err != nil {
				t.Fatalf("the reopened log forked: %v", err)
			}
			for i, r := range rs {
				if _, err := r.Verify(log.LeafHash(fmt.Appendf(nil, "second %d", i)), verifier); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestSequencerRefusesOversizedEntry(t *testing.T) {
	ctx := context.Background()
	store := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/big")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	appendN(t, seq, "small", 3)
	before, err := store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(ctx, make([]byte, log.MaxEntrySize+1)); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Errorf("Append of %d bytes: %v, want ErrEntryTooLarge", log.MaxEntrySize+1, err)
	}
	if _, err := seq.Append(ctx, nil); err == nil {
		t.Error("Append of an empty entry succeeded")
	}
	after, err := store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, after, before)
	if err := seq.Err(); err != nil {
		t.Fatalf("a refused entry stopped the log: %v", err)
	}
	// The largest entry an entry bundle holds is accepted.
	big := bytes.Repeat([]byte{'x'}, log.MaxEntrySize)
	r, err := seq.Append(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != before.Size {
		t.Errorf("index %d, want %d", r.Index, before.Size)
	}
}

// tamperedStore reports a state whose compact range was changed.
type tamperedStore struct {
	log.Storage
	tamper func(*log.State)
}

func (s *tamperedStore) State(ctx context.Context) (log.State, error) {
	st, err := s.Storage.State(ctx)
	if err != nil {
		return st, err
	}
	st.Range = slices.Clone(st.Range)
	s.tamper(&st)
	return st, nil
}

func TestOpenSequencerDetectsTampering(t *testing.T) {
	ctx := context.Background()
	store := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/tamper")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A range of more than one hash, and at least two checkpoints (13
	// concurrent appends can share one commit).
	appendN(t, seq, "first", 1)
	appendN(t, seq, "entry", 12)
	seq.Close()
	otherSigner, otherVerifier := logtest.NewKey(t, "provlog.test/tamper")

	for _, tc := range []struct {
		name   string
		tamper func(*log.State)
	}{
		{"root differs", func(st *log.State) {
			st.Range[0] = bytes.Clone(st.Range[0])
			st.Range[0][0] ^= 1
		}},
		{"last subtree differs", func(st *log.State) {
			st.Range[len(st.Range)-1] = log.LeafHash([]byte("forged"))
		}},
		{"range does not fit size", func(st *log.State) { st.Range = st.Range[1:] }},
		{"size differs", func(st *log.State) { st.Size-- }},
		{"checkpoint of another size", func(st *log.State) {
			// The first checkpoint the log signed.
			errStop := errors.New("stop")
			err := store.Checkpoints(ctx, 0, func(_ uint64, cp []byte) error {
				st.Checkpoint = cp
				return errStop
			})
			if !errors.Is(err, errStop) {
				t.Fatal(err)
			}
		}},
		{"checkpoint by another key", func(st *log.State) {
			c, err := log.ParseCheckpointNote(st.Checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			if st.Checkpoint, err = log.SignCheckpoint(c, otherSigner); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenSequencer(ctx, &tamperedStore{Storage: store, tamper: tc.tamper}, signer, verifier, nil)
			if err == nil {
				s.Close()
				t.Fatal("OpenSequencer accepted a tampered state")
			}
			if !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error %q does not say the state is corrupt", err)
			}
		})
	}

	// The untampered store opens; a mismatched key pair does not.
	s, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := OpenSequencer(ctx, store, signer, otherVerifier, nil); err == nil {
		s.Close()
		t.Error("OpenSequencer accepted a verifier that is not the signer's")
	}
	// Another log's key pair of the same name is named as the likely
	// cause, not only the store.
	if s, err := OpenSequencer(ctx, store, otherSigner, otherVerifier, nil); err == nil || !strings.Contains(err.Error(), "the last checkpoint is not signed by the log key given") {
		if s != nil {
			s.Close()
		}
		t.Errorf("another key pair: %v", err)
	}
}

// TestSequencerCloseWhileAppending closes sequencers under load: every
// Append must return, with a receipt or ErrClosed. (Before Close waited for
// Appends that had passed its check, one could queue a request after Close
// drained the queue and wait for an answer forever; this test catches that
// only now and then, as the window is narrow.)
func TestSequencerCloseWhileAppending(t *testing.T) {
	signer, verifier := logtest.NewKey(t, "provlog.test/close")
	iterations := 500
	if testing.Short() {
		iterations = 50
	}
	for iter := range iterations {
		seq, err := OpenSequencer(context.Background(), logtest.NewMemory(), signer, verifier, nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					_, err := seq.Append(context.Background(), []byte("x"))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Append: %v", err)
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(iter%50) * time.Microsecond)
		seq.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("iteration %d: Append still waiting a minute after Close", iter)
		}
	}
}

// TestSequencerShown: SequencerOptions.Shown has every checkpoint before
// a receipt carries it, newer ones only; when it fails, the append is
// refused (its outcome unknown) and the log stops.
func TestSequencerShown(t *testing.T) {
	ctx := context.Background()
	signer, verifier := logtest.NewKey(t, "provlog.test/shown")
	var mu sync.Mutex
	var shown []uint64
	fail := false
	seq, err := OpenSequencer(ctx, logtest.NewMemory(), signer, verifier, &SequencerOptions{Shown: func(cp []byte) error {
		c, err := log.ParseCheckpointNote(cp)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("disk on fire")
		}
		shown = append(shown, c.Size)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for i := range 20 {
		r, err := seq.Append(ctx, fmt.Appendf(nil, "e%d", i))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := log.ParseCheckpointNote(r.Checkpoint)
		mu.Lock()
		last := shown[len(shown)-1]
		mu.Unlock()
		if last < c.Size {
			t.Fatalf("a receipt of size %d left while Shown had %d", c.Size, last)
		}
	}
	for i := 1; i < len(shown); i++ {
		if shown[i] <= shown[i-1] {
			t.Fatalf("Shown was given size %d after %d", shown[i], shown[i-1])
		}
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := seq.Append(ctx, []byte("unrecorded")); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("an append whose checkpoint could not be recorded: %v", err)
	}
	if seq.Err() == nil {
		t.Fatal("the log goes on after its checkpoint could not be recorded")
	}
}
