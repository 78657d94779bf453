package main

// Tests of `provlog token add`'s edits of a config file.

import (
	"os"
	"path/filepath"
	"strings"
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
