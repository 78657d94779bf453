package logpebble

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

func scrubOptions(t *testing.T) *Options {
	o := faultOptions(t, nil)
	o.ScrubInterval, o.ScrubBytes = 2*time.Millisecond, 16<<10
	return o
}

// unread reports whether the store in dir opens and serves its newest
// entry with no error, without a scrub.
func unread(t *testing.T, dir string) bool {
	t.Helper()
	plain, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		return false
	}
	defer plain.Close()
	st, err := plain.State(t.Context())
	if err != nil {
		return false
	}
	if _, err := plain.Entries(t.Context(), st.Size-1, st.Size); err != nil {
		return false
	}
	time.Sleep(50 * time.Millisecond)
	return plain.Err() == nil
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 20*time.Second, what, cond)
}

// waitForWithin polls cond for up to d.
func waitForWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// TestScrubFindsCorruption flips a byte in an entry block of an sstable,
// which opening the store does not read: the store opens and takes
// commits; then, with no read or write from the test, the background
// scrub meets the block, the store stops naming the corruption and the
// file, and the scrub's status says so.
func TestScrubFindsCorruption(t *testing.T) {
	dir := t.TempDir()
	flushedLog(t, dir, 300)
	// Compacted to the bottom, so that opening the store starts no
	// compaction, which would read every block (CI saw all nine places
	// tried "read by opening" when the flushes had left tables in L0).
	c, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.db.Compact(t.Context(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, false); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sstable after a flush")
	}
	sort.Strings(ssts)
	// Which block opening reads (the newest entries, the tree's upper
	// nodes) depends on how the flush laid the tables out, so the test
	// tries a few places and damages the first one that, without a
	// scrub, opening and serving the newest entries does not meet.
	damaged := ""
	for _, sst := range ssts {
		for _, frac := range []int64{3, 2, 5} {
			if damaged != "" {
				break
			}
			clean, err := os.ReadFile(sst)
			if err != nil {
				t.Fatal(err)
			}
			damage(t, sst, int64(len(clean))/frac, false)
			if unread(t, dir) {
				damaged = sst
				continue
			}
			if err := os.WriteFile(sst, clean, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if damaged == "" {
		t.Fatalf("every damaged place tried (%d tables) is read by opening the store", len(ssts))
	}
	ssts[0] = damaged

	opts := scrubOptions(t)
	var mu sync.Mutex
	said := 0 // the scrub's error lines
	opts.Errorf = func(format string, args ...any) {
		if strings.HasPrefix(fmt.Sprintf(format, args...), "logpebble: scrub:") {
			mu.Lock()
			said++
			mu.Unlock()
		}
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The store fails a moment before the scrub records its own error.
	waitFor(t, "the scrub to fail the store", func() bool { return s.Err() != nil && s.ScrubStatus().LastError != "" })
	if err := s.Err(); !errors.Is(err, log.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(ssts[0])) {
		t.Fatalf("Err after the scrub met the damaged block: %v, want corruption naming %s", err, filepath.Base(ssts[0]))
	}
	ss := s.ScrubStatus()
	if !strings.Contains(ss.LastError, "corrupt") || ss.LastErrorAt.IsZero() || ss.Interval != 2*time.Millisecond {
		t.Fatalf("scrub status %+v", ss)
	}
	t.Logf("scrub: %+v", ss)
	// It reads the damaged slice again every interval, and says so once.
	waitFor(t, "the scrub to meet the damage again", func() bool {
		return s.ScrubStatus().LastErrorAt.Sub(ss.LastErrorAt) > 20*ss.Interval
	})
	mu.Lock()
	defer mu.Unlock()
	if said != 1 {
		t.Errorf("the scrub logged the same damage %d times, want once", said)
	}
}

// TestScrubPasses: on a sound store the scrub goes round and round (a
// pass reads every key), appends go on beside it, and it stops with Close.
func TestScrubPasses(t *testing.T) {
	dir := t.TempDir()
	signer, v := logtest.NewKey(t, "faults.example/log")
	l, err := openFaultLog(t, dir, nil, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	if errs := l.appendAll("p", 300, 4); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if err := l.store.db.Flush(); err != nil {
		t.Fatal(err)
	}
	l.close()
	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	pass, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir, scrubOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(t.Context(), s, signer, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := seq.Append(t.Context(), testEntry("scrub", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "two scrub passes", func() bool { return s.ScrubStatus().Passes >= 2 })
	seq.Close()
	ss := s.ScrubStatus()
	if ss.LastError != "" || s.Err() != nil {
		t.Fatalf("scrub of a sound store: %+v, %v", ss, s.Err())
	}
	if ss.Bytes < 2*pass.Bytes || ss.LastPass.IsZero() {
		t.Fatalf("two passes read %d bytes, a pass is at least %d", ss.Bytes, pass.Bytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after := s.ScrubStatus().Bytes
	time.Sleep(20 * time.Millisecond)
	if got := s.ScrubStatus().Bytes; got != after {
		t.Fatalf("the scrub read %d bytes after Close", got-after)
	}
}
