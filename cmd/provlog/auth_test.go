package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// TestAuthConfig: the auth: section as the config file gives it, its
// introspection secret read from a file beside it, and what it refuses.
func TestAuthConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "introspect.secret"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `auth:
  resource: https://provlog.example/mcp
  issuers:
    - issuer: https://idp.example/
      discovery_url: https://idp.example/.well-known/openid-configuration
      introspection: {client_id: provlog, client_secret_file: introspect.secret}
  scopes: {tools: [provlog.tools], tasks: [provlog.tasks], log: [provlog.log]}
`
	cfg, err := loadConfig(writeConfig(t, dir, good))
	if err != nil {
		t.Fatal(err)
	}
	is := cfg.Auth.Issuers[0]
	if is.Introspection.ClientSecret != "s3cret" || is.ActorPrefix != "idp.example:" || is.ActorClaim != "sub" {
		t.Errorf("auth issuer %+v, introspection %+v", is, is.Introspection)
	}
	for _, c := range []struct{ name, text, want string }{
		{"unknown key", strings.Replace(good, "  scopes:", "  scope:", 1), "field scope not found"},
		{"static actor in an issuer's namespace", good + "actors:\n  - {id: \"idp.example:alice\", token_sha256: " + strings.Repeat("ab", 32) + "}\n",
			`static actor "idp.example:alice" is in an auth: issuer's actor namespace`},
		{"no resource", strings.Replace(good, "  resource: https://provlog.example/mcp\n", "", 1), "resource"},
		{"HS256", strings.Replace(good, "      introspection:", "      algorithms: [HS256]\n      introspection:", 1), `algorithm "HS256" is not accepted`},
		{"missing secret", strings.Replace(good, "introspect.secret", "nope.secret", 1), "reading the introspection client secret"},
		{"actor_prefix provlog's own", strings.Replace(good, "      introspection:", "      actor_prefix: \"provlog.idp:\"\n      introspection:", 1),
			`config: auth: issuer "https://idp.example/": actor_prefix "provlog.idp:": actor ids beginning "provlog.", or reading as such, are provlog's own; set actor_prefix`},
	} {
		_, err := loadConfig(writeConfig(t, dir, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// TestAuthSidecar: a sidecar trusting a test issuer serves the protected
// resource metadata, challenges a request without a token on /mcp and
// the log API, refuses a log read without the log's scope (403) and every
// bad token (401) without writing anything, keeps static tokens working,
// and lets a mapped actor hand a task to another actor of the same
// issuer, who accepts it.
func TestAuthSidecar(t *testing.T) {
	is := authntest.Start(t)
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`data: data
auth:
  resource: %s
  issuers:
    - {issuer: %s, discovery_url: %s, actor_prefix: "idp:"}
  scopes: {tools: [provlog.tools], tasks: [provlog.tasks], log: [provlog.log]}
`, resource, is.URL, is.DiscoveryURL()))
	base, _ := startServeAt(t, addr, "--config", cfg)
	get := func(path, token string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, body := get(p, "")
		var md struct {
			Resource string   `json:"resource"`
			AS       []string `json:"authorization_servers"`
		}
		if json.Unmarshal([]byte(body), &md); resp.StatusCode != 200 || md.Resource != resource || len(md.AS) != 1 || md.AS[0] != is.URL {
			t.Errorf("%s: %s %s", p, resp.Status, body)
		}
	}
	meta := `Bearer resource_metadata="http://` + addr + `/.well-known/oauth-protected-resource/mcp"`
	for _, p := range []string{"/log/entry/0", "/log/anchors", "/log/task/t_00000000000000000000000000000000"} {
		if resp, body := get(p, ""); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != meta {
			t.Errorf("%s without a token: %s %q %s", p, resp.Status, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != meta {
		t.Errorf("/mcp without a token: %v %v", resp, err)
	}

	size := logSize(t, base)
	toolsOnly := is.Mint(t, is.Claims(resource, "alice", "provlog.tools"))
	resp, body := get("/log/entry/0", toolsOnly)
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="provlog.log"`) {
		t.Errorf("a log read without the log scope: %s %q %s", resp.Status, ch, body)
	}
	for _, b := range is.BadTokens(t, resource, "provlog.log") {
		resp, _ := get("/log/entry/0", b.Token)
		if resp.StatusCode != b.Status || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="`+b.Code+`"`) {
			t.Errorf("%s: %s %q", b.Name, resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp, _ := get("/log/entry/0", is.Mint(t, is.Claims(resource, "alice", "provlog.log"))); resp.StatusCode != 200 {
		t.Errorf("a log read with the log scope: %s", resp.Status)
	}
	local, err := os.ReadFile(filepath.Join(dir, "data", "local.token"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := get("/log/entry/0", strings.TrimSpace(string(local))); resp.StatusCode != 200 {
		t.Errorf("the static local token: %s", resp.Status)
	}
	if n := logSize(t, base); n != size {
		t.Fatalf("refused requests grew the log from %s to %s", size, n)
	}

	// Alice creates a task, accepts it and hands it to idp:bob, who
	// accepts it; a handoff to a name outside any namespace is refused.
	alice := connectHTTP(t, base, is.Mint(t, is.Claims(resource, "alice", "provlog.tasks")))
	created, _ := callTool(t, alice, "create_task", map[string]any{"title": "review"})
	id, _ := created["task_id"].(string)
	callTool(t, alice, "accept_task", map[string]any{"task_id": id})
	res, err := alice.CallTool(t.Context(), toolParams("handoff_task", map[string]any{"task_id": id, "to": "bob"}))
	if err != nil || !res.IsError || !strings.Contains(contentText(res), `begins with "idp:"`) {
		t.Errorf("handoff outside the namespace: %v %v", contentText(res), err)
	}
	// IDP:bob is the namespace's for static ids, but no token maps to
	// it (prefixes are matched exactly there): nobody could accept it.
	if res, err := alice.CallTool(t.Context(), toolParams("handoff_task", map[string]any{"task_id": id, "to": "IDP:bob"})); err != nil || !res.IsError {
		t.Errorf("handoff to IDP:bob, whom no token maps to: %v %v", contentText(res), err)
	}
	callTool(t, alice, "handoff_task", map[string]any{"task_id": id, "to": "idp:bob"})
	bob := connectHTTP(t, base, is.Mint(t, is.Claims(resource, "bob", "provlog.tasks")))
	accepted, rc := callTool(t, bob, "accept_task", map[string]any{"task_id": id})
	if b, _ := json.Marshal(accepted); !strings.Contains(string(b), `"owner":"idp:bob"`) {
		t.Errorf("accept by bob: %s", b)
	}
	e := receiptEntry(t, base, strings.TrimSpace(string(local)), rc)
	if e.Actor != "idp:bob" || e.Auth == nil || e.Auth.Subject != "bob" || e.Auth.Issuer != is.URL {
		t.Errorf("bob's task.accept entry: actor %q, auth %+v", e.Actor, e.Auth)
	}
}

func toolParams(name string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}

// receiptEntry reads the entry a receipt is for from the log API.
func receiptEntry(t *testing.T, base, token, receipt string) *log.Entry {
	t.Helper()
	r, err := log.ParseReceipt([]byte(receipt))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	b := getEntry(t, base, token, r.Index)
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatalf("entry %d: %v (%s)", r.Index, err, b)
	}
	return e
}

// TestAuthREADME: the README's auth: example is a config provlog takes.
func TestAuthREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Actors from your identity provider")
	_, block, ok2 := strings.Cut(sec, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no auth: example")
	}
	cfg, err := loadConfig(writeConfig(t, t.TempDir(), block))
	if err != nil {
		t.Fatalf("the README's auth: example: %v", err)
	}
	if !cfg.Auth.Owns("kc:alice@acme.example") {
		t.Error("the README's actors are not the issuer's")
	}
}
