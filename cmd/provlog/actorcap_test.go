package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionShareConfig: sessions.per_actor reaches the front: with
// sessions {max: 4, per_actor: 2}, alice's third initialize gets 503
// naming the key, and bob still opens a session.
func TestSessionShareConfig(t *testing.T) {
	dir := t.TempDir()
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	text := fmt.Sprintf("data: %s\nsessions: {max: 4, per_actor: 2}\nactors:\n  - {id: alice, token_sha256: %s}\n  - {id: bob, token_sha256: %s}\n",
		filepath.Join(dir, "data"), sum("alice-token"), sum("bob-token"))
	cfg := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := startServe(t, "--config", cfg)
	initialize := func(token string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 2 {
		if code, b := initialize("alice-token"); code != http.StatusOK {
			t.Fatalf("alice's initialize %d of her 2: %d %s", i+1, code, b)
		}
	}
	if code, b := initialize("alice-token"); code != http.StatusServiceUnavailable || !strings.Contains(b, "sessions.per_actor 2 of sessions.max 4") {
		t.Errorf("alice's third initialize: %d %s; want 503 naming sessions.per_actor", code, b)
	}
	if code, b := initialize("bob-token"); code != http.StatusOK {
		t.Errorf("bob's initialize with alice at her share: %d %s", code, b)
	}
}
