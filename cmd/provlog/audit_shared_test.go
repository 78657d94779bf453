package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

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
			dsn := pgtest.DSN(t)
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			sc := mustOpenSidecar(t, &Config{Data: data, Actor: "local", Store: dsn})
			for i := range 10 {
				if _, err := sc.seq.Append(ctx, callEntry("s", "t", map[string]any{"i": i})); err != nil {
					t.Fatal(err)
				}
			}
			sc.close()
			cfgFile := filepath.Join(dir, "provlog.yaml")
			if err := os.WriteFile(cfgFile, []byte("data: "+data+"\nstore: "+dsn+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			audit := func() (int, string) {
				var out bytes.Buffer
				code := run(ctx, []string{"audit", "--data", data, "--config", cfgFile}, &out, &out)
				return code, out.String()
			}
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
