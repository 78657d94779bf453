package anchor_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
)

// failingTree is the log's storage with reads that fail once failing is
// set (a PostgreSQL that went away, a disk that went bad); it counts the
// reads that failed.
type failingTree struct {
	online.Tree
	failing atomic.Bool
	failed  atomic.Int64
}

func (f *failingTree) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	if f.failing.Load() {
		f.failed.Add(1)
		return nil, errors.New("storage went away")
	}
	return f.Tree.ReadNodes(ctx, ids)
}

// syncBuffer is a log sink several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failingLog is the log with appends that fail once failing is set; it
// counts the appends that failed.
type failingLog struct {
	online.Log
	failing atomic.Bool
	failed  atomic.Int64
}

func (f *failingLog) Append(ctx context.Context, entry []byte) (*log.Receipt, error) {
	if f.failing.Load() {
		f.failed.Add(1)
		return nil, errors.New("storage went away")
	}
	return f.Log.Append(ctx, entry)
}

// TestRetryWhileStorageFails: a TSA failed a round, so the runner retries
// it when its backoff runs out; meanwhile the log's storage fails, so the
// retry's tick stops before asking anyone: it cannot prove the new
// checkpoint consistent with the anchored one (reads fail), or cannot
// append the anchor entry of the record stored before (appends fail),
// which must go first. The TSA's retry time must move on, or Run wakes
// for it at once, again and again: a spin, with a storage call and a log
// line each time. The test counts the storage calls that failed and the
// log lines against the time it let Run go: at most one a TSA a half of
// the least backoff (the jitter's floor), plus two. On the base Run spun:
// thousands of failed calls and as many log lines in 300ms with a 50ms
// backoff.
func TestRetryWhileStorageFails(t *testing.T) {
	for _, c := range []struct {
		name      string
		failReads bool
	}{{"reads fail", true}, {"appends fail", false}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 2, false)
			tree := &failingTree{Tree: e.store}
			lg := &failingLog{Log: e.seq}
			var logs syncBuffer
			const minBackoff = 50 * time.Millisecond
			r := e.runner(func(o *online.Options) {
				o.Tree, o.Log = tree, lg
				o.MinBackoff, o.MaxBackoff = minBackoff, minBackoff
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := r.AnchorNow(ctx); err != nil {
				t.Fatal(err)
			}
			e.appendN(1)
			// TSA 0 fails this round; TSA 1 anchors it, unless appends
			// fail (then its record waits for its entry).
			e.tsas[0].SetFault(testtsa.Down)
			if c.failReads {
				e.tsas[1].SetFault(testtsa.Down)
			} else {
				lg.failing.Store(true)
			}
			r.AnchorNow(ctx)
			if s := r.Status(); s.Authorities[0].ConsecutiveFailures != 1 {
				t.Fatalf("TSA 0 after a round it was down: %+v", s.Authorities[0])
			}
			e.tsas[0].SetFault(testtsa.OK)
			e.tsas[1].SetFault(testtsa.OK)
			tree.failing.Store(c.failReads)
			lines0 := strings.Count(logs.String(), "\n")
			failed0 := tree.failed.Load() + lg.failed.Load()

			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- r.Run(ctx) }()
			time.Sleep(300 * time.Millisecond)
			cancel()
			<-done
			elapsed := time.Since(start)
			calls := tree.failed.Load() + lg.failed.Load() - failed0
			lines := strings.Count(logs.String(), "\n") - lines0
			most := 2 + int64(len(e.tsas))*int64(elapsed/(minBackoff/2)) // each TSA retries on its own
			if calls > most || int64(lines) > most {
				t.Errorf("in %v with storage failing and TSA 0 due for a retry, backoff %v: %d failed storage calls and %d log lines; want at most %d",
					elapsed.Round(time.Millisecond), minBackoff, calls, lines, most)
			}
			if s := r.Status(); !strings.Contains(s.LastError, "storage went away") {
				t.Errorf("status' last error %q does not say why", s.LastError)
			}
		})
	}
}

var _ log.NodeReader = (*failingTree)(nil)
