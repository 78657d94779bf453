package logpebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// faultLog is a sequencer over a Store, with what it acknowledged.
type faultLog struct {
	t      *testing.T
	dir    string
	signer note.Signer
	v      note.Verifier
	store  *Store
	seq    *server.Sequencer

	mu    sync.Mutex
	acked []acked
}

type acked struct {
	index uint64
	entry []byte
	size  uint64
	cp    []byte
}

// faultOptions are small memtables, so that a short run rotates the WAL
// and flushes several times.
func faultOptions(t testing.TB, fs vfs.FS) *Options {
	return &Options{MemTableSize: 64 << 10, CacheSize: 1 << 20, Logf: func(string, ...any) {}, testingOnlyFS: fs}
}

// testEntry makes the n-th test entry, about 1 KiB, unique per run.
func testEntry(run string, n int) []byte {
	e := &log.Entry{Kind: "call", Time: time.Unix(1764547200, 0).UTC(), Actor: "t", Fields: map[string]any{
		"server": "s", "tool": "t", "args": map[string]any{"pad": strings.Repeat("x", 1000), "run": run, "n": n},
	}}
	b, err := e.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

// appendAll appends n entries from w goroutines and records what was
// acknowledged; it returns the errors of the appends that failed.
func (l *faultLog) appendAll(run string, n, w int) []error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range w {
		wg.Go(func() {
			for i := range next {
				e := testEntry(run, i)
				r, err := l.seq.Append(context.Background(), e)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				c, _, err := log.OpenCheckpoint(r.Checkpoint, l.v)
				if err != nil {
					l.t.Errorf("receipt's checkpoint: %v", err)
					continue
				}
				l.mu.Lock()
				l.acked = append(l.acked, acked{index: r.Index, entry: e, size: c.Size, cp: r.Checkpoint})
				l.mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// checkHolds checks the invariants on a store reopened after a fault:
// every acknowledged entry is at its index, every checkpoint handed out is
// the store's own at its size, and the log audits clean.
func checkHolds(t *testing.T, s *Store, v note.Verifier, ack []acked) {
	t.Helper()
	ctx := context.Background()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	for _, a := range ack {
		if a.size > st.Size {
			t.Fatalf("acknowledged checkpoint of size %d, reopened log has size %d", a.size, st.Size)
		}
		got, err := s.Entries(ctx, a.index, a.index+1)
		if err != nil || !bytes.Equal(got[0], a.entry) {
			t.Fatalf("acknowledged entry %d: got %.40q, %v", a.index, got, err)
		}
		cp, err := s.Checkpoint(ctx, a.size)
		if err != nil || !bytes.Equal(cp, a.cp) {
			t.Fatalf("checkpoint of size %d handed out differs from the reopened log's: %v\n%s\nvs\n%s", a.size, err, a.cp, cp)
		}
	}
	if st.Size > 0 {
		if _, err := log.Audit(ctx, s, v, ""); err != nil {
			t.Fatalf("audit of the reopened log: %v", err)
		}
	}
}

// openFaultLog opens the store in dir on fs and a sequencer over it.
func openFaultLog(t *testing.T, dir string, fs vfs.FS, signer note.Signer, v note.Verifier) (*faultLog, error) {
	s, err := Open(dir, faultOptions(t, fs))
	if err != nil {
		return nil, err
	}
	seq, err := server.OpenSequencer(context.Background(), s, signer, v, &server.SequencerOptions{
		Genesis: func() ([]byte, error) { return log.Genesis(time.Unix(1764547200, 0), v.Name(), "", []byte{1}, "test") },
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return &faultLog{t: t, dir: dir, signer: signer, v: v, store: s, seq: seq}, nil
}

func (l *faultLog) close() {
	l.seq.Close()
	if err := l.store.Close(); err != nil {
		l.t.Logf("closing the store after a fault: %v", err)
	}
}

// faultCases are the operations of the commit path that the injection
// test fails, each at several points of a run, before and after it
// persisted.
var faultCases = []struct {
	kind, file string
}{
	{"write", "wal"}, {"sync", "wal"}, {"create", "wal"},
	{"write", "sst"}, {"sync", "sst"}, {"create", "sst"},
	{"write", "manifest"}, {"sync", "manifest"}, {"create", "manifest"},
	{"create", "marker"}, {"remove", "marker"}, {"sync", "other"}, {"remove", "sst"}, {"rename", "any"},
}

// TestInjectedFaults fails each write, sync, create, rename and remove of
// the commit path at several points of a run of appends (each of 8
// appenders appending until the log stops), before the operation and after
// it persisted, and checks after each: no panic; once the fault hit the
// commit path, appends are refused with an error naming an I/O error; the
// store reopened on a sound disk holds every acknowledged entry at its
// index and every checkpoint handed out at its size, and audits clean.
func TestInjectedFaults(t *testing.T) {
	signer, v := logtest.NewKey(t, "faults.example/log")
	const n, w = 400, 8
	for _, fc := range faultCases {
		match := func(name string) bool { return fc.file == "any" || fileKind(name) == fc.file }
		// A clean run counts the operations.
		counter := &injectFS{FS: vfs.Default, kind: fc.kind, match: match}
		l, err := openFaultLog(t, t.TempDir(), counter, signer, v)
		if err != nil {
			t.Fatal(err)
		}
		if errs := l.appendAll("count", n, w); len(errs) > 0 {
			t.Fatalf("clean run: %v", errs[0])
		}
		l.close()
		total := counter.Count()
		if total == 0 {
			t.Fatalf("%s %s: a run does no such operation", fc.kind, fc.file)
		}
		points := map[int]bool{1: true, 2: true, total/4 + 1: true, total / 2: true, total: true}
		stopped := 0
		for at := range points {
			if at < 1 {
				continue
			}
			for _, after := range []bool{false, true} {
				name := fmt.Sprintf("%s-%s-%d-of-%d-%s", fc.kind, fc.file, at, total, map[bool]string{false: "before", true: "after"}[after])
				t.Run(name, func(t *testing.T) {
					if runFault(t, signer, v, fc.kind, match, at, after, n, w) {
						stopped++
					}
				})
			}
		}
		if stopped == 0 {
			t.Errorf("%s %s: no injected fault stopped the log", fc.kind, fc.file)
		}
	}
}

// runFault runs one case and reports whether the fault stopped the log.
func runFault(t *testing.T, signer note.Signer, v note.Verifier, kind string, match func(string) bool, at int, after bool, n, w int) (stopped bool) {
	dir := t.TempDir()
	fs := &injectFS{FS: vfs.Default, kind: kind, match: match, after: after, n: at}
	l, err := openFaultLog(t, dir, fs, signer, v)
	if err != nil {
		// The fault hit opening: it must say so, and nothing was acknowledged.
		if log.FaultReason(err) == "" && !errors.Is(err, errInjected) {
			t.Fatalf("open failed without naming the fault: %v", err)
		}
		checkReopen(t, dir, v, nil)
		return true
	}
	errs := l.appendAll(t.Name(), n, w)
	for _, err := range errs {
		if !errors.Is(err, log.ErrIO) {
			t.Fatalf("append refused without naming the fault: %v", err)
		}
	}
	if len(errs) > 0 && l.seq.Err() == nil {
		t.Fatalf("appends failed, but the sequencer reports no error")
	}
	if err := l.seq.Err(); err != nil {
		stopped = true
		if _, aerr := l.seq.Append(context.Background(), testEntry("late", 0)); aerr == nil {
			t.Fatalf("append after the fault (%v) succeeded", err)
		}
		// What is durable is still read.
		if size, _ := l.seq.Checkpoint(); size > 0 {
			if _, err := l.store.Entries(context.Background(), 0, size); err != nil {
				t.Fatalf("reading the log after the fault: %v", err)
			}
		}
		resumeInPlace(t, l, err)
	}
	l.close()
	checkReopen(t, dir, v, l.acked)
	return stopped
}

// resumeInPlace resumes a log stopped by a fault that has passed (an
// injectFS fails once): it must hold what a restart would (checkHolds)
// and take appends again. Only a panic inside Pebble may refuse.
func resumeInPlace(t *testing.T, l *faultLog, fault error) {
	t.Helper()
	if err := l.seq.Resume(context.Background()); err != nil {
		if !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("resuming in place after %v: %v", fault, err)
		}
		t.Logf("not resumed: %v", err)
		return
	}
	checkHolds(t, l.store, l.v, l.acked)
	if errs := l.appendAll(l.t.Name()+"-resumed", 20, 4); len(errs) > 0 {
		t.Fatalf("appending after resuming in place: %v", errs[0])
	}
}

// checkReopen reopens dir on a sound disk and checks that it holds ack.
func checkReopen(t *testing.T, dir string, v note.Verifier, ack []acked) {
	t.Helper()
	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatalf("reopening after the fault: %v", err)
	}
	defer s.Close()
	checkHolds(t, s, v, ack)
}

// TestRefusedBatchNotRestored: a commit during which the file system
// failed is refused as of unknown outcome, and the store does not record
// it as published: reopened, the log ends at the last batch acknowledged.
// A failed write of the WAL is not done, and the WAL frozen after it
// keeps nothing, so only the published record could bring the refused
// batch back; it did (a task.create whose caller was told it failed was
// in the log after a restart, and a call refused before forwarding was
// listed as cut off).
func TestRefusedBatchNotRestored(t *testing.T) {
	signer, v := logtest.NewKey(t, "faults.example/log")
	for _, at := range []int{3, 10, 40} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			dir := t.TempDir()
			fs := &injectFS{FS: vfs.Default, kind: "write", match: func(name string) bool { return fileKind(name) == "wal" }, n: at}
			l, err := openFaultLog(t, dir, fs, signer, v)
			if err != nil {
				t.Fatal(err)
			}
			errs := l.appendAll(t.Name(), 200, 4)
			l.close()
			if !fs.Fired() || len(errs) == 0 {
				t.Fatalf("the fault did not stop the log (fired %v, %d refused)", fs.Fired(), len(errs))
			}
			acked := uint64(1) // genesis
			for _, a := range l.acked {
				acked = max(acked, a.size)
			}
			s, err := Open(dir, faultOptions(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkHolds(t, s, v, l.acked)
			if st, _ := s.State(context.Background()); st.Size != acked {
				t.Errorf("reopened at size %d; the last batch acknowledged ended at %d (%d appends refused: %v)", st.Size, acked, len(errs), errs[0])
			}
		})
	}
}

// TestPanicInCommit: Pebble panics in a commit (its instance was closed
// under the store, and DB.Apply panics on a closed instance). The commit
// fails saying so, the store stops, Reopen refuses (the panic may have
// left Pebble's locks held), and Close returns without touching Pebble.
func TestPanicInCommit(t *testing.T) {
	s, err := Open(t.TempDir(), faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender()
	fill(t, s, a, 2, 3, 100)
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	err = s.Commit(t.Context(), a.batch([][]byte{[]byte("after")}))
	if err == nil || !strings.Contains(err.Error(), "Pebble panicked") || !errors.Is(err, log.ErrIO) {
		t.Fatalf("commit on a panicking Pebble: %v", err)
	}
	t.Logf("the commit said: %v", err)
	if serr := s.Err(); serr == nil {
		t.Fatalf("the store did not stop after %v", err)
	}
	if err := s.Reopen(t.Context()); !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("Reopen after a panic in Pebble: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after a panic in Pebble: %v", err)
	}
}
