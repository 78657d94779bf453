package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSIGHUPTruncatedConfig: a SIGHUP that comes while the config is
// being rewritten in place (truncated, then written: what `>` and most
// non-atomic writers do) must not apply the empty file it catches: that
// would drop every token and stop every server. The reload is refused
// and says why; the running config stays whole, and the next SIGHUP,
// with the file written, applies it.
func TestSIGHUPTruncatedConfig(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	const token = "truncated-config-token"
	sum := sha256.Sum256([]byte(token))
	cfgPath := filepath.Join(dir, "provlog.yaml")
	full, _ := json.Marshal(map[string]any{ // JSON is YAML
		"data": filepath.Join(dir, "d"), "reload_interval": "0s",
		"servers": []map[string]any{{"id": "a", "command": []string{exe, "-test.run=^$"},
			"env": map[string]string{sidefxEnv: filepath.Join(dir, "a.txt")}}},
		"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
	})
	if err := os.WriteFile(cfgPath, full, 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, stderr := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	cs := connectHTTP(t, base, token)
	ctx := context.Background()
	listed := func() bool {
		lt, err := cs.ListTools(ctx, nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__append" })
	}
	waitFor(t, "a__append is listed", listed)

	reloads := func() int { return strings.Count(stderr.String(), "msg=\"config reload") }
	before := reloads()
	// The writer has truncated the file and not yet written it.
	if err := os.Truncate(cfgPath, 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP reload is logged", func() bool { return reloads() > before })
	if !strings.Contains(stderr.String(), "config reload failed; the running config stays") {
		t.Errorf("a SIGHUP that caught the config empty was not refused: %s", stderr.String())
	}
	if !tokenWorks(t, base, token) {
		t.Error("a SIGHUP that caught the config empty dropped alice's token")
	}
	if !listed() {
		t.Error("a SIGHUP that caught the config empty removed server a")
	}

	// The writer finishes; the next SIGHUP applies the whole file.
	if err := os.WriteFile(cfgPath, full, 0o600); err != nil {
		t.Fatal(err)
	}
	before = reloads()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second SIGHUP reload is logged", func() bool { return reloads() > before })
	waitFor(t, "alice's token works", func() bool { return tokenWorks(t, base, token) })
	// A new session: on main the empty config's reload revoked the
	// first one's token, which ended it.
	cs = connectHTTP(t, base, token)
	waitFor(t, "a__append is listed", listed)
}
