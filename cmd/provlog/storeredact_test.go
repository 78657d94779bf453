package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreKeywordFormNotShown: a store: written in libpq's keyword/value
// form (host=... password=...) is refused, serve and a command reading
// the shared log saying they want a PostgreSQL URL, without repeating
// its password on stderr.
func TestStoreKeywordFormNotShown(t *testing.T) {
	const secret = "S3CRET-kw-7f3a"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	body := "data: ./d\nstore: \"host=/tmp user=provlog password=" + secret + " dbname=provlog\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--config", cfg, "--http", "127.0.0.1:0"},
		{"audit", "--data", filepath.Join(dir, "d"), "--config", cfg},
	} {
		out, rc := runCmd(t, args...)
		if rc == 0 || !strings.Contains(out, "want a PostgreSQL URL") {
			t.Errorf("%s: exit %d, %q; want the store refused", args[0], rc, out)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the store's password: %q", args[0], out)
		}
	}
}
