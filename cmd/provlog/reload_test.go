package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tokenWorks reports whether the log API accepts a bearer token.
func tokenWorks(t *testing.T, base, token string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/log/entry/0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// TestConfigReload: a token added while the sidecar runs works without a
// restart, and a session open across the reload keeps working.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 50ms\n"), 0o600)
	alice := addToken(t, cfg, "alice")
	base, _ := startServe(t, "--config", cfg)
	cs := connectHTTP(t, base, alice)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "before"})

	bob := addToken(t, cfg, "bob")
	waitFor(t, "bob's new token works", func() bool { return tokenWorks(t, base, bob) })
	got, _ := callTool(t, cs, "get_task_status", map[string]any{"task_id": created["task_id"]})
	if got == nil {
		t.Fatal("alice's session broke across the reload")
	}
	bs := connectHTTP(t, base, bob)
	callTool(t, bs, "create_task", map[string]any{"title": "by bob"})

	// A broken edit changes nothing.
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, []byte("servers: [\n")...), 0o600)
	time.Sleep(200 * time.Millisecond) // several reload intervals
	if !tokenWorks(t, base, alice) || !tokenWorks(t, base, bob) {
		t.Fatal("a config that does not load replaced the running tokens")
	}
	// Removing a token takes it away.
	os.WriteFile(cfg, []byte(strings.Split(string(b), "  - id: \"bob\"")[0]), 0o600)
	waitFor(t, "bob's removed token is refused", func() bool { return !tokenWorks(t, base, bob) })
	if !tokenWorks(t, base, alice) {
		t.Fatal("alice's token stopped working")
	}
}

// TestConfigReloadSIGHUP: with polling off, SIGHUP applies the change.
func TestConfigReloadSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\nreload_interval: 0s\n"), 0o600)
	base, _ := startServe(t, "--config", cfg)
	carol := addToken(t, cfg, "carol")
	time.Sleep(100 * time.Millisecond)
	if tokenWorks(t, base, carol) {
		t.Fatal("with reload_interval: 0s the token works before SIGHUP")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "carol's token works after SIGHUP", func() bool { return tokenWorks(t, base, carol) })
}

// TestRestartKeys: a reload names the keys it did not apply.
func TestRestartKeys(t *testing.T) {
	dir := t.TempDir()
	a, err := loadConfig(writeConfig(t, dir, "data: ./d\nservers:\n  - {id: a, command: [x]}\nactors: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadConfig(writeConfig(t, dir, "data: ./e\nservers:\n  - {id: a, command: [y]}\nactors:\n  - {id: z, token_sha256: "+h1+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(restartKeys(a, b, false), ","); got != "data,servers" {
		t.Errorf("restart keys %q, want data,servers", got)
	}
	if got := strings.Join(restartKeys(a, b, true), ","); got != "servers" {
		t.Errorf("with --data: restart keys %q, want servers", got)
	}
}
