package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHandoffToLookAlike: with handoff_any_actor: true, a task offered
// or handed off to an id that reads as a configured actor but is not it
// (a Cyrillic а for the a of alice, fullwidth letters, alice composed
// otherwise) is refused, naming the actor it reads as, and nothing is
// written: else the task is reserved for nobody who can accept it, and
// provlog tasks shows it reserved for alice, who is refused. Other ids
// are taken as before.
func TestHandoffToLookAlike(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	tokens := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString("handoff_any_actor: true\nactors:\n")
	for _, id := range []string{"alice", "bob"} {
		tokens[id] = "token-" + id + "-lookalike"
		sum := sha256.Sum256([]byte(tokens[id]))
		fmt.Fprintf(&cfg, "  - id: %s\n    token_sha256: %s\n", id, hex.EncodeToString(sum[:]))
	}
	cfgPath := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keygen(data, "provlog.test/lookalike"); err != nil {
		t.Fatal(err)
	}
	p := startSidecarProc(t, "--config", cfgPath, "--data", data)
	bob := connectHTTP(t, p.base, tokens["bob"])
	out, _, err := toolCall(bob, "create_task", map[string]any{"title": "for alice"})
	if err != nil {
		t.Fatal(err)
	}
	id := out["task_id"].(string)
	if _, _, err := toolCall(bob, "accept_task", map[string]any{"task_id": id}); err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, to := range []string{"\u0430lice", "\uff41lice", "Alice"} {
		if _, _, err := toolCall(bob, "create_task", map[string]any{"title": "x", "offer_to": to}); err == nil {
			taken++
			t.Errorf("create_task offered to %q (reads as alice): written", to)
		} else if !strings.Contains(err.Error(), `"alice"`) {
			t.Errorf("create_task offered to %q: %v (does not name alice)", to, err)
		}
		if _, _, err := toolCall(bob, "handoff_task", map[string]any{"task_id": id, "to": to}); err == nil {
			taken++
			t.Errorf("handoff_task to %q (reads as alice): written", to)
			break // the task is now reserved; nothing more to hand off
		} else if !strings.Contains(err.Error(), `"alice"`) {
			t.Errorf("handoff_task to %q: %v (does not name alice)", to, err)
		}
	}
	t.Logf("look-alikes of alice taken: %d", taken)
	if _, _, err := toolCall(bob, "create_task", map[string]any{"title": "x", "offer_to": "carol"}); err != nil {
		t.Errorf("offer_to carol (no look-alike): %v", err)
	}
	if _, _, err := toolCall(bob, "handoff_task", map[string]any{"task_id": id, "to": "alice"}); err != nil {
		t.Errorf("handoff to alice: %v", err)
	}
}
