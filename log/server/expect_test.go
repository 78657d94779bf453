package server

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// heldStore holds every Commit while hold is locked, and tells entered
// when one starts. If panics is set, a Commit, once released, panics with
// it.
type heldStore struct {
	log.Storage
	hold    sync.Mutex
	entered chan struct{}
	panics  string
}

func (s *heldStore) Commit(ctx context.Context, b *log.Batch) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	s.hold.Lock()
	s.hold.Unlock()
	if s.panics != "" {
		panic(s.panics)
	}
	return s.Storage.Commit(ctx, b)
}

type appended struct {
	r   *log.Receipt
	err error
}

func appendAsync(seq *Sequencer, ex Pending, entry string) chan appended {
	c := make(chan appended, 1)
	go func() {
		var a appended
		if ex != nil {
			a.r, a.err = ex.Append(context.Background(), []byte(entry))
		} else {
			a.r, a.err = seq.Append(context.Background(), []byte(entry))
		}
		c <- a
	}()
	return c
}

func await(t *testing.T, c chan appended, what string) *log.Receipt {
	t.Helper()
	select {
	case a := <-c:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a.r
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer within a minute", what)
		return nil
	}
}

// queued is how many requests wait to be taken into a commit.
func (s *Sequencer) queued() int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue)
}

// eventually polls cond until it holds (or fails the test after a minute).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 60000 {
			t.Fatalf("%s: still not so after a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// openHeld opens a sequencer with the given commit delay whose last
// commit carried two entries (so that the next one counts as under load).
func openHeld(t *testing.T, delay time.Duration) (*Sequencer, *heldStore) {
	t.Helper()
	st := &heldStore{Storage: logtest.NewMemory(), entered: make(chan struct{}, 1)}
	signer, verifier := logtest.NewKey(t, "provlog.test/expect")
	seq, err := OpenSequencer(context.Background(), st, signer, verifier, &SequencerOptions{CommitDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })

	st.hold.Lock()
	a := appendAsync(seq, nil, "a")
	<-st.entered // a's commit is under way, alone
	b, c := appendAsync(seq, nil, "b"), appendAsync(seq, nil, "c")
	eventually(t, "b and c queued", func() bool { return seq.queued() == 2 })
	st.hold.Unlock()
	await(t, a, "a")
	rb, rc := await(t, b, "b"), await(t, c, "c")
	if !bytes.Equal(rb.Checkpoint, rc.Checkpoint) {
		t.Fatal("b and c were not committed together; the test's premise is wrong")
	}
	return seq, st
}

// waiting asserts that x, appended with one more announcement open, is
// held by the sequencer rather than committed.
func waiting(t *testing.T, seq *Sequencer, x chan appended, commits uint64) {
	t.Helper()
	// Queued, leading (no commit under way), and x's own announcement
	// withdrawn.
	eventually(t, "x queued", func() bool { return seq.queued() == 1 && seq.expected.Load() == 1 })
	time.Sleep(50 * time.Millisecond)
	select {
	case a := <-x:
		t.Fatalf("x was answered (%v, %v) while another announced append was on its way", a.r, a.err)
	default:
	}
	if got := seq.Stats().Commits; got != commits {
		t.Fatalf("%d commits while x waits, want %d", got, commits)
	}
}

func TestExpectedAppendsShareACommit(t *testing.T) {
	seq, _ := openHeld(t, time.Hour)
	commits := seq.Stats().Commits
	ex, ey := seq.Expect(), seq.Expect()
	x := appendAsync(seq, ex, "x")
	waiting(t, seq, x, commits)
	y := appendAsync(seq, ey, "y")
	rx, ry := await(t, x, "x"), await(t, y, "y")
	if !bytes.Equal(rx.Checkpoint, ry.Checkpoint) || rx.Index+1 != ry.Index {
		t.Fatalf("x (index %d) and y (index %d) were not committed together", rx.Index, ry.Index)
	}
	if got := seq.Stats().Commits; got != commits+1 {
		t.Fatalf("%d commits, want %d", got, commits+1)
	}
	if n := seq.expected.Load(); n != 0 {
		t.Fatalf("%d announcements still open", n)
	}
}

func TestExpectedAppendAloneIsNotDelayed(t *testing.T) {
	// No load: the last commit carried one entry. An announcement that
	// never comes must not hold the append (the delay is an hour).
	st := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/expect")
	seq, err := OpenSequencer(context.Background(), st, signer, verifier, &SequencerOptions{CommitDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for i := range 3 {
		never := seq.Expect()
		await(t, appendAsync(seq, seq.Expect(), fmt.Sprint("x", i)), "x")
		await(t, appendAsync(seq, nil, fmt.Sprint("y", i)), "y")
		never.Cancel()
	}
}

func TestExpectedCancelEndsTheWait(t *testing.T) {
	seq, _ := openHeld(t, time.Hour)
	commits := seq.Stats().Commits
	ex, ey := seq.Expect(), seq.Expect()
	x := appendAsync(seq, ex, "x")
	waiting(t, seq, x, commits)
	ey.Cancel()
	ey.Cancel() // twice is harmless
	await(t, x, "x")
	if n := seq.expected.Load(); n != 0 {
		t.Fatalf("%d announcements still open", n)
	}
}

func TestExpectedWaitEndsWithTheDelay(t *testing.T) {
	seq, _ := openHeld(t, 20*time.Millisecond)
	never := seq.Expect()
	defer never.Cancel()
	await(t, appendAsync(seq, seq.Expect(), "x"), "x")
}

func TestExpectedCloseWhileWaiting(t *testing.T) {
	seq, _ := openHeld(t, time.Hour)
	commits := seq.Stats().Commits
	ex := seq.Expect()
	seq.Expect() // never comes
	x := appendAsync(seq, ex, "x")
	waiting(t, seq, x, commits)
	go seq.Close()
	await(t, x, "x") // committed on the way out
}

func TestExpectedConcurrent(t *testing.T) {
	// Many callers announcing, appending and withdrawing at once, with a
	// short delay: every append lands exactly once and no announcement is
	// left open.
	st := logtest.NewMemory()
	signer, verifier := logtest.NewKey(t, "provlog.test/expect")
	seq, err := OpenSequencer(context.Background(), st, signer, verifier, &SequencerOptions{CommitDelay: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	const goroutines, each = 32, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				ex := seq.Expect()
				if i%7 == 3 {
					ex.Cancel() // a call that is not recorded after all
					continue
				}
				var err error
				if i%5 == 0 {
					_, err = seq.Append(context.Background(), fmt.Appendf(nil, "%d/%d", g, i))
					ex.Cancel()
				} else {
					_, err = ex.Append(context.Background(), fmt.Appendf(nil, "%d/%d", g, i))
				}
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := uint64(0)
	for i := range each {
		if i%7 != 3 {
			want += goroutines
		}
	}
	if size, _ := seq.Checkpoint(); size != want {
		t.Fatalf("log size %d, want %d", size, want)
	}
	if n := seq.expected.Load(); n != 0 {
		t.Fatalf("%d announcements still open", n)
	}
	s := seq.Stats()
	t.Logf("%d appends in %d commits", s.Appends, s.Commits)
}
