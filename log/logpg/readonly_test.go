package logpg

import (
	"errors"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestReadOnly: a read-only Open of a database without a log fails,
// naming the missing tables, and creates none; on a log it reads what a
// writer committed, refuses commits and blob writes before sending them,
// and its transactions are read only, so the database refuses any write.
func TestReadOnly(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	tables := func() string {
		return strings.TrimSpace(pgtest.Psql(t, dsn, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`))
	}
	ro := &Options{ReadOnly: true}

	_, err := Open(ctx, dsn, ro)
	if !errors.Is(err, ErrNoLog) || !strings.Contains(err.Error(), "provlog_state") || !strings.Contains(err.Error(), "provlog serve") {
		t.Fatalf("read-only Open of an empty schema: %v, want ErrNoLog naming provlog_state and saying how a log is made", err)
	}
	if n := tables(); n != "0" {
		t.Fatalf("a read-only Open created %s tables", n)
	}

	w := open(t, dsn)
	want := commitShared(t, w, "w", 3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pgtest.Psql(t, dsn, `DROP TABLE provlog_blobs`)
	if _, err := Open(ctx, dsn, ro); !errors.Is(err, ErrNoLog) || !strings.Contains(err.Error(), "provlog_blobs") || strings.Contains(err.Error(), "provlog_state") {
		t.Fatalf("read-only Open without provlog_blobs: %v, want ErrNoLog naming provlog_blobs alone", err)
	}
	if n := tables(); n != "5" {
		t.Fatalf("%s tables after a read-only Open with one missing, want 5", n)
	}
	// A writer's Open creates what is missing.
	w = open(t, dsn)
	w.Close()

	r, err := Open(ctx, dsn, ro)
	if err != nil {
		t.Fatalf("read-only Open of a log: %v", err)
	}
	defer r.Close()
	st, err := r.State(ctx)
	if err != nil || st.Size != want.Size {
		t.Fatalf("State: size %d, %v; want %d", st.Size, err, want.Size)
	}
	if es, err := r.Entries(ctx, 0, 3); err != nil || len(es) != 3 {
		t.Fatalf("Entries: %d, %v", len(es), err)
	}
	before := pgtest.Psql(t, dsn, `SELECT size, (SELECT count(*) FROM provlog_entries), (SELECT count(*) FROM provlog_checkpoints) FROM provlog_state`)
	err = r.CommitShared(ctx, nil, func(st log.State, _ []bool) (*log.Batch, error) {
		t.Error("a read-only handle built a batch")
		return buildOn(t, st, "r", 1), nil
	})
	if !errors.Is(err, errReadOnly) {
		t.Errorf("CommitShared on a read-only handle: %v, want a refusal", err)
	}
	if err := r.Commit(ctx, buildOn(t, st, "r", 1)); !errors.Is(err, errReadOnly) {
		t.Errorf("Commit on a read-only handle: %v, want a refusal", err)
	}
	if _, err := r.Blobs().Put([]byte("blob")); !errors.Is(err, errReadOnly) {
		t.Errorf("putting a blob through a read-only handle: %v, want a refusal", err)
	}
	var readOnly string
	if err := r.pool.QueryRow(ctx, `SHOW transaction_read_only`).Scan(&readOnly); err != nil || readOnly != "on" {
		t.Errorf("transaction_read_only on the read-only handle's connections: %q, %v; want on", readOnly, err)
	}
	if _, err := r.pool.Exec(ctx, `INSERT INTO provlog_blobs (name, data) VALUES ('x', '')`); err == nil {
		t.Error("the database took a write from a read-only handle's connection")
	}
	if after := pgtest.Psql(t, dsn, `SELECT size, (SELECT count(*) FROM provlog_entries), (SELECT count(*) FROM provlog_checkpoints) FROM provlog_state`); after != before {
		t.Errorf("the log changed under a read-only handle: %q, then %q", before, after)
	}
}
