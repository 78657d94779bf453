package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// backupShared copies the shared log's tables aside in its schema (a
// backup); the restore it returns puts that copy back in place of what
// is there (a restore from it).
func backupShared(t *testing.T, dsn string) (restore func()) {
	t.Helper()
	tables := []string{"provlog_state", "provlog_nodes", "provlog_entries", "provlog_checkpoints", "provlog_keys", "provlog_blobs"}
	for _, tb := range tables {
		pgtest.Psql(t, dsn, "CREATE TABLE backup_"+tb+" AS SELECT * FROM "+tb)
	}
	return func() {
		for _, tb := range tables {
			pgtest.Psql(t, dsn, "DELETE FROM "+tb+"; INSERT INTO "+tb+" SELECT * FROM backup_"+tb)
		}
	}
}

// TestSharedRestoredFromOlderBackup: a shared log restored from a backup
// older than what its sidecars handed out. The running sidecars stop
// writing, saying the store went back; a sidecar whose data dir knows
// nothing (keys copied, nothing handed out) cannot tell and extends it,
// here past the size the others handed out; and the two that handed out
// a newer checkpoint (handed-out.*) refuse to start on it, naming the
// loss, whether the store is shorter or as long with another root.
func TestSharedRestoredFromOlderBackup(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	cfgOf := func(n string) *Config { return &Config{Data: filepath.Join(dir, n), Actor: "local", Store: dsn} }
	a := mustOpenSidecar(t, cfgOf("a"))
	for _, n := range []string{"b", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{logKeyFile, logVKeyFile, anchorPubFile, anchorKeyFile} {
			copyDir(t, filepath.Join(dir, "a", f), filepath.Join(dir, n, f))
		}
	}
	appendN := func(sc *sidecar, who string, n int) {
		t.Helper()
		for i := range n {
			if _, err := sc.seq.Append(ctx, callEntry(who, "t", map[string]any{"i": i})); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(a, "a", 3)
	restore := backupShared(t, dsn)
	appendN(a, "a", 5)
	b := mustOpenSidecar(t, cfgOf("b"))
	appendN(b, "b", 1)
	handed, _ := b.seq.Checkpoint()
	restore()
	for name, sc := range map[string]*sidecar{"A": a, "B": b} {
		_, err := sc.seq.Append(ctx, callEntry(name, "t", map[string]any{"after": "restore"}))
		if err == nil || !strings.Contains(err.Error(), "below") || sc.seq.Err() == nil {
			t.Errorf("%s, running, appended to the store restored from an older backup: %v (stopped: %v)", name, err, sc.seq.Err())
		}
		sc.close()
	}
	c := mustOpenSidecar(t, cfgOf("c"))
	if size, _ := c.seq.Checkpoint(); size >= handed {
		t.Fatalf("the restored store is of size %d, want below %d", size, handed)
	}
	appendN(c, "c", int(handed)) // past what A and B handed out, on another history
	c.close()
	for _, n := range []string{"a", "b"} {
		_, err := openSidecar(ctx, cfgOf(n), quietLogger(), true)
		var lost *log.LostError
		if !errors.As(err, &lost) || !strings.Contains(err.Error(), "handed-out.0") {
			t.Errorf("%s started on the restored store that another sidecar extended: %v", n, err)
		}
	}
}
