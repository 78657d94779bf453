package main

// Probe (identity): one token hash listed under two actor ids loads, and
// the token then silently acts as whichever is listed first.
//
// What is wrong: loadConfig checks each actors:/readers: entry on its own
// (id, namespace, 64 hex digits) but never that a token_sha256 appears
// once. tokens.lookup returns the first entry that matches, in the order
// local, actors:, readers:. So a config where bob's entry was copied from
// alice's (or where two operators paste the same hash) loads without a
// word, and every call made with that token is recorded as alice's, though
// the operator meant it for bob: the log names the wrong actor and nothing
// ever says so. The same holds for a hash listed under actors: and
// readers: (the reader token acts), and for local.token's hash listed
// under another id (it acts as the stdio actor).
//
// Observed: loadConfig accepts the config; lookup of the token gives
// "alice" for the entry meant for "bob".
//
// Fix: in loadConfig, refuse a token_sha256 listed more than once across
// actors: and readers: (naming both ids), and in newTokens/reloadConfig
// refuse (or log and drop) an entry whose hash is local.token's.
import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbeDuplicateTokenHashLoads(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	sum := sha256.Sum256([]byte("the-token-meant-for-bob"))
	h := hex.EncodeToString(sum[:])
	text := "data: ./d\nactors:\n  - id: alice\n    token_sha256: " + h + "\n  - id: bob\n    token_sha256: " + h + "\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(cfg)
	if err != nil {
		return // refused: the defect is gone
	}
	tk := newTokens(c, strings.Repeat("0", 64))
	e, ok := tk.lookup("the-token-meant-for-bob")
	t.Errorf("a config listing one token_sha256 under alice and bob loads; the token acts as %q (found %v), so one actor's calls are recorded as the other's", e.actor, ok)
}
