package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/opp"
)

// sharedAudit makes a shared log in a fresh schema, written by a sidecar
// that fill is given, and returns its DSN and a run of provlog audit of
// it (exit code, output).
func sharedAudit(t *testing.T, fill func(sc *sidecar)) (string, func() (int, string)) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	sc := mustOpenSidecar(t, &Config{Data: data, Actor: "local", Store: dsn})
	fill(sc)
	sc.close()
	cfgFile := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgFile, []byte("data: "+data+"\nstore: "+dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dsn, func() (int, string) {
		var out bytes.Buffer
		code := run(ctx, []string{"audit", "--data", data, "--config", cfgFile}, &out, &out)
		return code, out.String()
	}
}

// TestAuditSharedNamesCorruptNodes: audit of a shared log compares every
// stored node with the tree it recomputes, the lowest levels too, and
// names a node row flipped or deleted by hand. (It read the nodes through
// a handle that hashes levels 1 and 2 from the leaves, and passed.)
func TestAuditSharedNamesCorruptNodes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, sql, want string }{
		{"level 1 flipped", `UPDATE provlog_nodes SET hash = set_byte(hash, 3, get_byte(hash, 3) # 1) WHERE level = 1 AND idx = 2`, "node 2 at level 1: the stored node differs from the recomputed one"},
		{"level 2 flipped", `UPDATE provlog_nodes SET hash = set_byte(hash, 3, get_byte(hash, 3) # 1) WHERE level = 2 AND idx = 1`, "node 1 at level 2: the stored node differs from the recomputed one"},
		{"level 1 deleted", `DELETE FROM provlog_nodes WHERE level = 1 AND idx = 2`, "node (1, 2): not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn, audit := sharedAudit(t, func(sc *sidecar) {
				for i := range 10 {
					if _, err := sc.seq.Append(ctx, callEntry("s", "t", map[string]any{"i": i})); err != nil {
						t.Fatal(err)
					}
				}
			})
			if code, out := audit(); code != 0 {
				t.Fatalf("audit of the intact log: exit %d\n%s", code, out)
			}
			pgtest.Psql(t, dsn, c.sql)
			if code, out := audit(); code == 0 || !strings.Contains(out, c.want) {
				t.Fatalf("audit after %s: exit %d, want a failure naming %q:\n%s", c.name, code, c.want, out)
			}
		})
	}
}

// TestAuditSharedNamesForgedKeys: audit of a shared log checks every row
// of its fence keys (provlog_keys) against the entries and names a row
// put in, changed or deleted by hand. It passed them all; a task's row
// set past the log's end fences off every acceptance of the task, for
// good. A deleted row was counted but its task not named, and a wrong
// row was counted as missing too.
func TestAuditSharedNamesForgedKeys(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, sql string
		want      []string
	}{
		{"past the end", `UPDATE provlog_keys SET last = 1000000 WHERE key = '{pending}'`, []string{`fence key "{pending}": names entry 1000000, but the log holds`}},
		{"stale", `UPDATE provlog_keys SET last = {created} WHERE key = '{accepted}'`, []string{`fence key "{accepted}": names entry {created}, but the task's latest entry is entry {last}`}},
		{"inserted", `INSERT INTO provlog_keys (key, last) VALUES ('no-such-task', 1)`, []string{`fence key "no-such-task": names entry 1, but no task of this id is in the log`}},
		{"genesis", `UPDATE provlog_keys SET last = 1 WHERE key = 'provlog/genesis'`, []string{`fence key "provlog/genesis": names entry 1, but the genesis is entry 0`}},
		{"deleted", `DELETE FROM provlog_keys WHERE key = '{pending}'`, []string{
			`fence keys: 1 of the 3 keys the entries give (the tasks and the genesis) have no row`,
			`fence key "{pending}": has no row, but the task is in the log (its latest entry is entry {pendingLast})`}},
		{"genesis deleted", `DELETE FROM provlog_keys WHERE key = 'provlog/genesis'`, []string{
			`fence keys: 1 of the 3 keys the entries give (the tasks and the genesis) have no row`,
			`fence key "provlog/genesis": has no row, but the log has its genesis entry (entry 0)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var pending, accepted string
			var pendingLast, created, last uint64
			dsn, audit := sharedAudit(t, func(sc *sidecar) {
				r := mustResult(t)(sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: "pending"}))
				pending, pendingLast = r.Task.ID, r.Index
				r = mustResult(t)(sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: "accepted"}))
				accepted, created = r.Task.ID, r.Index
				last = mustResult(t)(sc.tasks.Accept(ctx, "bob", accepted)).Index
			})
			if code, out := audit(); code != 0 || !strings.Contains(out, "fence keys: 3 rows agree with the entries") {
				t.Fatalf("audit of the intact log: exit %d, want 0 and its 3 fence keys checked\n%s", code, out)
			}
			fill := strings.NewReplacer("{pending}", pending, "{accepted}", accepted, "{created}", fmt.Sprint(created),
				"{last}", fmt.Sprint(last), "{pendingLast}", fmt.Sprint(pendingLast)).Replace
			pgtest.Psql(t, dsn, fill(c.sql))
			code, out := audit()
			for _, want := range c.want {
				if want = fill(want); code == 0 || !strings.Contains(out, want) {
					t.Errorf("audit after a fence key row %s by hand: exit %d, want a failure naming %q:\n%s", c.name, code, want, out)
				}
			}
			// A wrong row is not a missing one too (it was counted so).
			if !strings.Contains(c.sql, "DELETE") && strings.Contains(out, "no row") {
				t.Errorf("audit after a fence key row %s by hand counts a key with no row:\n%s", c.name, out)
			}
		})
	}
}

// TestAuditSharedMissingKeysBounded: of many tasks whose fence key rows
// are deleted, audit names as many as it names of other fence key
// problems (maxKeyProblems) and counts the rest.
func TestAuditSharedMissingKeysBounded(t *testing.T) {
	ctx := context.Background()
	const tasks = maxKeyProblems + 5
	dsn, audit := sharedAudit(t, func(sc *sidecar) {
		for i := range tasks {
			mustResult(t)(sc.tasks.Create(ctx, "alice", opp.CreateArgs{Title: fmt.Sprint("task ", i)}))
		}
	})
	pgtest.Psql(t, dsn, `DELETE FROM provlog_keys WHERE key LIKE 't\_%'`)
	code, out := audit()
	// One problem counts them, then maxKeyProblems-1 name a task each.
	named := strings.Count(out, `": has no row, but the task is in the log`)
	more := fmt.Sprintf("and %d more rows", tasks+1-maxKeyProblems)
	if code == 0 || named != maxKeyProblems-1 || !strings.Contains(out, fmt.Sprintf("%d of the %d keys", tasks, tasks+1)) || !strings.Contains(out, more) {
		t.Errorf("audit after deleting the rows of %d tasks: exit %d, %d tasks named, want %d and %q:\n%s", tasks, code, named, maxKeyProblems-1, more, out)
	}
}
