package main

// One token_sha256 listed twice (under two actor ids, under actors: and
// readers:, or as local.token's and an actor's) is refused when the config
// loads: a token acts as the first entry of its hash, so the log would
// name that actor for the calls the operator meant for the other, and
// nothing would ever say so.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDuplicateTokenHashRefused(t *testing.T) {
	sum := sha256.Sum256([]byte("the-token-meant-for-bob"))
	h := hex.EncodeToString(sum[:])
	local := sha256.Sum256([]byte("the-local-token"))
	for name, c := range map[string]struct{ text, want string }{
		"two actors":         {"actors:\n  - {id: alice, token_sha256: " + h + "}\n  - {id: bob, token_sha256: " + h + "}\n", `actors[1] "bob" has the token_sha256 of actors[0] "alice"`},
		"actor and reader":   {"actors:\n  - {id: alice, token_sha256: " + h + "}\nreaders:\n  - {id: auditor, token_sha256: " + strings.ToUpper(h) + "}\n", `readers[0] "auditor" has the token_sha256 of actors[0] "alice"`},
		"local.token's hash": {"actors:\n  - {id: bob, token_sha256: " + hex.EncodeToString(local[:]) + "}\n", `actors[0] "bob" has the token_sha256 of actor "local" (local.token`},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "d"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "d", localToken), []byte("the-local-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := writeConfig(t, dir, "data: d\n"+c.text)
		if _, err := loadConfig(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: loadConfig: %v, want an error saying %s", name, err, c.want)
		}
	}
}
