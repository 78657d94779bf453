package logpg

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestOpenWhileAnotherCommits: a sidecar that starts while another
// commits opens the log; it does not take the other's new rows for
// corruption. (It read the state and the rows past it in two snapshots,
// and failed with "entries past the size".)
func TestOpenWhileAnotherCommits(t *testing.T) {
	dsn := pgtest.DSN(t)
	w := open(t, dsn)
	defer w.Close()
	commitShared(t, w, "first", 1)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			commitShared(t, w, "load", 1)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 100 {
		s, err := Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatalf("open %d while another handle commits: %v", i, err)
		}
		s.Close()
	}
}

// TestOpenNamesCorruptRows: a row changed, deleted or added by hand at
// the end of the log, or in its state, is refused on open with an error
// naming it, and nothing is written.
func TestOpenNamesCorruptRows(t *testing.T) {
	for _, c := range []struct{ name, sql, want string }{
		{"entry past the size", `INSERT INTO provlog_entries VALUES (11, 'x')`, "entries past the size 11"},
		{"leaf past the size", `INSERT INTO provlog_nodes VALUES (0, 11, sha256('x'))`, "leaf hashes (provlog_nodes, level 0) past the size 11"},
		{"checkpoint past the size", `INSERT INTO provlog_checkpoints VALUES (12, 'x')`, "checkpoints past the size 11"},
		{"last entry deleted", `DELETE FROM provlog_entries WHERE idx = 10`, "entry 10 is missing"},
		{"last checkpoint deleted", `DELETE FROM provlog_checkpoints WHERE size = 11`, "checkpoint for size 11 is missing"},
		{"last checkpoint flipped", `UPDATE provlog_checkpoints SET note = set_byte(note, 3, get_byte(note, 3) # 1) WHERE size = 11`, "checkpoint stored for size 11 (provlog_checkpoints) differs from the state row's"},
		{"compact range flipped", `UPDATE provlog_state SET compact = set_byte(compact, 3, get_byte(compact, 3) # 1)`, "node (3, 0) differs from the compact range of size 11"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			s := open(t, dsn)
			commitShared(t, s, "a", 8)
			commitShared(t, s, "b", 3)
			s.Close()
			pgtest.Psql(t, dsn, c.sql)
			before := pgtest.Psql(t, dsn, `SELECT (SELECT count(*) FROM provlog_entries) || '/' || (SELECT count(*) FROM provlog_nodes)`)
			s, err := Open(t.Context(), dsn, nil)
			if err == nil {
				s.Close()
				t.Fatalf("open succeeded, want an error naming %q", c.want)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("open: %v, want ErrCorrupt naming %q", err, c.want)
			}
			if after := pgtest.Psql(t, dsn, `SELECT (SELECT count(*) FROM provlog_entries) || '/' || (SELECT count(*) FROM provlog_nodes)`); after != before {
				t.Fatalf("rows %s after the refused open, %s before", after, before)
			}
		})
	}
}

// QuietWAL is quietWAL, for the tests of package logpg_test.
var QuietWAL = quietWAL
