package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestSharedHealthSeesDiskFull: the shared log's PostgreSQL on a small
// tmpfs, filled until a call is refused "disk full". Between calls,
// /healthz must keep saying 503 "database disk full" (the next call
// would be refused as well), and ok once a call is recorded again with
// space freed. It said ok (200) as soon as the call was refused: its
// probe, a commit that writes nothing, passes on a full disk.
func TestSharedHealthSeesDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	mnt := t.TempDir()
	mountTmpfs(t, mnt, "160m")
	for _, d := range []string{mnt, filepath.Dir(mnt)} {
		if err := os.Chmod(d, 0o755); err != nil { // for the postgres user
			t.Fatal(err)
		}
	}
	old, had := os.LookupEnv("TMPDIR")
	t.Setenv("TMPDIR", mnt) // the cluster's dir, and no other's
	cluster := pgtest.NewCluster(t)
	if os.Unsetenv("TMPDIR"); had {
		os.Setenv("TMPDIR", old)
	}
	effects := filepath.Join(t.TempDir(), "fx.txt")
	addr := startSidefxHTTP(t, effects)
	procs, tokens, _, _ := twoSidecars(t, cluster.DSN, fmt.Sprintf("servers:\n  - id: fx\n    url: http://%s/mcp\n", addr))
	p := procs[0]
	waitTools(t, p.base, tokens["a00"], []string{"fx__append"})
	cs := connectHTTP(t, p.base, tokens["a00"])
	n := 0
	call := func() error {
		n++
		_, _, err := toolCall(cs, "fx__append", map[string]any{"text": fmt.Sprintf("call-%d-%s", n, strings.Repeat("p", 4000))})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	health := func() (int, string) {
		resp, err := http.Get(p.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, fmt.Sprint(h["storage"])
	}
	filler := fill(t, mnt)
	var refused error
	for k := 0; k < 500 && refused == nil; k++ {
		refused = call()
	}
	if refused == nil || !strings.Contains(refused.Error(), "disk full") {
		t.Fatalf("calls on a full database: %v; want one refused saying disk full", refused)
	}
	for i := range 3 {
		if code, storage := health(); code != http.StatusServiceUnavailable || storage != "database disk full" {
			t.Fatalf("/healthz (%d) after a call was refused for a full disk: %d %q; want 503 \"database disk full\"", i, code, storage)
		}
	}
	os.Remove(filler)
	var err error
	for k := 0; k < 100; k++ {
		if err = call(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("a call with space freed: %v", err)
	}
	if code, storage := health(); code != http.StatusOK || storage != "ok" {
		t.Errorf("/healthz after a call was recorded with space freed: %d %q; want 200 ok", code, storage)
	}
}
