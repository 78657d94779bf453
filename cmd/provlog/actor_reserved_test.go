package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/authn/authntest"
)

// TestReservedActorRefusedAtFront: a token whose claim maps to an actor
// id of provlog's own, or one that reads as it (the prefix "prov" and the
// sub "log.operator" make "provlog.operator") is refused with 401 invalid_token, saying why, on
// /mcp and on the log API, and nothing is written; the same issuer's
// other actors work. A static token given such an id in an edited config
// is not taken up by the reload.
func TestReservedActorRefusedAtFront(t *testing.T) {
	is := authntest.Start(t)
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	dir := t.TempDir()
	text := fmt.Sprintf(`data: data
reload_interval: 50ms
auth:
  resource: %s
  issuers:
    - {issuer: %s, jwks_url: %s, actor_prefix: "prov"}
`, resource, is.URL, is.JWKSURL())
	cfg := writeConfig(t, dir, text)
	base, _, logs := startServeLogged(t, addr, "--config", cfg)
	refused := func(what, token string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(ch, `error="invalid_token"`) || !strings.Contains(ch, "the sidecar's own") {
			t.Errorf("%s on /mcp: %s %q", what, resp.Status, ch)
		}
		if tokenWorks(t, base, token) {
			t.Errorf("%s reads the log", what)
		}
		// What a client would do next: were the token taken, this
		// would write a task entry under provlog's id.
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		if err == nil {
			defer cs.Close()
			res, err := cs.CallTool(t.Context(), toolParams("create_task", map[string]any{"title": "as provlog"}))
			t.Errorf("%s connected; create_task: %v %v", what, contentText(res), err)
		}
	}

	size := logSize(t, base)
	// The last two read as provlog's own: ONE DOT LEADER for the dot,
	// Cyrillic o.
	for _, sub := range []string{"log.operator", "log.retention", "Log.Anything", "log\u2024operator", "l\u043eg.x"} {
		refused("a token mapped to prov"+sub, is.Mint(t, is.Claims(resource, sub)))
	}
	if n := logSize(t, base); n != size {
		t.Fatalf("refused tokens grew the log from %s to %s", size, n)
	}
	bob := connectHTTP(t, base, is.Mint(t, is.Claims(resource, "bob")))
	_, rc := callTool(t, bob, "create_task", map[string]any{"title": "by bob"})
	local, err := os.ReadFile(filepath.Join(dir, "data", "local.token"))
	if err != nil {
		t.Fatal(err)
	}
	if e := receiptEntry(t, base, strings.TrimSpace(string(local)), rc); e.Actor != "provbob" {
		t.Errorf("bob's task.create entry by %q, want provbob", e.Actor)
	}

	// A static token mapped to provlog's own id: the edited config does
	// not load, and the running one stays.
	const tok = "a static token for provlog.operator"
	sum := sha256.Sum256([]byte(tok))
	failed := strings.Count(logs.String(), "config reload failed")
	writeConfig(t, dir, text+"actors:\n  - {id: provlog.operator, token_sha256: "+hex.EncodeToString(sum[:])+"}\n")
	waitFor(t, "the config with a reserved actor is refused", func() bool { return strings.Count(logs.String(), "config reload failed") > failed })
	if l := logs.String(); !strings.Contains(l, "config: actors[0].id: actor id") || !strings.Contains(l, "provlog.operator") || !strings.Contains(l, "is the sidecar's own") {
		t.Errorf("the refusal does not name the key and the id:\n%s", logs.String())
	}
	size = logSize(t, base)
	if tokenWorks(t, base, tok) {
		t.Error("the static token of provlog.operator reads the log")
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	if cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{tok}}}, nil); err == nil {
		cs.Close()
		t.Error("the static token of provlog.operator connected")
	}
	if n := logSize(t, base); n != size {
		t.Fatalf("a refused static token grew the log from %s to %s", size, n)
	}
}
