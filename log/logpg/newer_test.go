package logpg

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestOpenNewerSchema: a log whose tables a newer build wrote (a state
// row of a version above schemaVersion) is not taken for this build's:
// Open, writable or read-only, says a newer provlog wrote it and which
// version this build reads, and leaves the database as it is: no table,
// row or function of the newer build is created or replaced (the
// function provlog_lock_at, which the schema's DDL replaces, keeps its
// row in pg_proc).
func TestOpenNewerSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	commitShared(t, s, "a", 3)
	s.Close()
	pgtest.Psql(t, dsn, fmt.Sprintf(`UPDATE provlog_state SET version = %d`, schemaVersion+1))
	snapshot := `SELECT (SELECT count(*) FROM provlog_entries) || '/' || (SELECT xmin FROM pg_proc WHERE proname = 'provlog_lock_at') || '/' || (SELECT xmin FROM provlog_state)`
	before := pgtest.Psql(t, dsn, snapshot)
	want := fmt.Sprintf("written by a newer provlog (schema version %d; this build reads up to %d)", schemaVersion+1, schemaVersion)
	for _, ro := range []bool{false, true} {
		s, err := Open(t.Context(), dsn, &Options{ReadOnly: ro})
		if err == nil {
			s.Close()
			t.Fatalf("Open (read-only %v) succeeded on tables of version %d", ro, schemaVersion+1)
		}
		if errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open (read-only %v): %v\nwant an error saying %q", ro, err, want)
		}
		if after := pgtest.Psql(t, dsn, snapshot); after != before {
			t.Errorf("Open (read-only %v) changed the database: entries/function row/state row %s, before %s", ro, after, before)
		}
	}
}
