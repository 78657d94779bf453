package main

// Tests of `provlog token add`'s edits of a config file.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestTokenAddIntoIssuerNamespace: token add holds the edited config to
// loadConfig's rules before writing it: an --actor inside an auth:
// issuer's actor_prefix (here idp:alice) is refused, exit 2, and the file
// is left as it was, where it printed a token and left a config that no
// longer loaded.
func TestTokenAddIntoIssuerNamespace(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	text := "data: ./d\n" +
		"auth:\n" +
		"  resource: https://provlog.example/mcp\n" +
		"  issuers:\n" +
		"    - issuer: https://idp.example\n" +
		"      jwks_url: https://idp.example/jwks\n" +
		"      actor_prefix: \"idp:\"\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(cfg); err != nil {
		t.Fatalf("the starting config does not load: %v", err)
	}
	out, code := runCmd(t, "token", "add", "--config", cfg, "--actor", "idp:alice")
	_, err := loadConfig(cfg)
	if code == 0 && err != nil {
		t.Fatalf("token add exited 0 (%q) but left a config that does not load: %v", strings.TrimSpace(out), err)
	}
	if code != 2 || !strings.Contains(out, "actor namespace") {
		t.Errorf("token add --actor idp:alice: exit %d, %q; want exit 2 naming the issuer's actor namespace", code, strings.TrimSpace(out))
	}
	if code != 0 {
		if b, _ := os.ReadFile(cfg); string(b) != text {
			t.Errorf("a refused token add changed the config:\n%s", b)
		}
	}
}

// TestTokenAddConcurrent: token adds to one config at once each store
// their token (they hold the config directory's lock around
// read-edit-rename); each read the old text, and the last rename won.
func TestTokenAddConcurrent(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(cfg, []byte("data: ./d\nactors:\n  - id: seed\n    token_sha256: "+strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	codes := make([]int, n)
	outs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], codes[i] = runCmd(t, "token", "add", "--config", cfg, "--actor", fmt.Sprintf("agent-%d", i))
		}()
	}
	wg.Wait()
	c, err := loadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, a := range c.Actors {
		stored[a.ID] = true
	}
	var lost []string
	for i := range n {
		id := fmt.Sprintf("agent-%d", i)
		if codes[i] == 0 && !stored[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d token adds exited 0 and printed a token, but the config does not hold them: %v", len(lost), lost)
	}
}

// TestTokenAddKeepsOwner: token add run as root keeps the config its
// owner's and group's (the sidecar's service user's), where the new file
// was root's and the sidecar could no longer read its own config.
func TestTokenAddKeepsOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a file of another user")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(cfg, []byte("data: ./d\nactors:\n  - id: alice\n    token_sha256: "+strings.Repeat("a", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const service = 65534 // the sidecar's service user (nobody here)
	if err := os.Chown(cfg, service, service); err != nil {
		t.Fatal(err)
	}
	addToken(t, cfg, "bob")
	fi, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != service || st.Gid != service {
		t.Errorf("after token add the config is owned by %d:%d (mode %v), was %d:%d: the sidecar's user can no longer read it",
			st.Uid, st.Gid, fi.Mode().Perm(), service, service)
	}
}
