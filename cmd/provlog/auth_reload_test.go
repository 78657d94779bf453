package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// TestConfigReloadAuth: auth: is reloaded live like servers: are. A call
// that was authenticated before the reload finishes under the old config
// and its entries keep the old actor; the next requests are judged by the
// new issuers' actor mapping and scopes; a config that does not load
// changes nothing.
func TestConfigReloadAuth(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	is := authntest.Start(t)
	const res = "https://provlog.test/mcp"
	fx, release := filepath.Join(dir, "fx.txt"), filepath.Join(dir, "release")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(auth map[string]any) {
		b, _ := json.Marshal(map[string]any{ // JSON is YAML
			"data": filepath.Join(dir, "d"), "reload_interval": "50ms", "auth": auth,
			"servers": []map[string]any{{"id": "fx", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: fx}}},
		})
		if err := os.WriteFile(cfgPath+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	authCfg := func(prefix, toolScope string) map[string]any {
		return map[string]any{"resource": res,
			"issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": prefix}},
			"scopes":  map[string]any{"tools": []string{toolScope}}}
	}
	write(authCfg("idp:", "provlog.tools"))
	base, stop, logs := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	metadata := func() string { return metadataOf(t, base) }
	ctx := context.Background()

	// alice's call is held by the downstream across the reload.
	alice := is.Mint(t, is.Claims(res, "alice", "provlog.tools"))
	cs := connectHTTP(t, base, alice)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	held := make(chan outcome, 1)
	go func() {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": "held", "until_file": release}})
		held <- outcome{r, err}
	}()
	waitFor(t, "the held call reaches the downstream", func() bool {
		b, _ := os.ReadFile(fx)
		return strings.Contains(string(b), "held\n")
	})

	// The issuer's actors become corp:..., and tools need another scope.
	write(authCfg("corp:", "provlog.tools.v2"))
	waitFor(t, "the reloaded auth: is served", func() bool { return strings.Contains(metadata(), "provlog.tools.v2") })
	// alice's token, presented anew, lacks the new scope: 403.
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__append","arguments":{"text":"refused"}}}`))
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="provlog.tools.v2"`) {
		t.Errorf("alice's token after the reload: %s, %q; want 403 naming scope provlog.tools.v2", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	// The held call, authenticated before, finishes.
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if o := <-held; o.err != nil || o.res.IsError {
		t.Fatalf("the call in flight across the reload: %v %+v", o.err, o.res)
	}
	bob := is.Mint(t, is.Claims(res, "bob", "provlog.tools.v2"))
	bs := connectHTTP(t, base, bob)
	callTool(t, bs, "fx__append", map[string]any{"text": "bob 1"})

	// A config that does not load (its refresh floor is out of bounds)
	// changes nothing: the scope it names is not served, bob still calls.
	failed := strings.Count(logs.String(), "config reload failed")
	bad := authCfg("other:", "provlog.tools.v3")
	bad["jwks_min_refresh"] = "1ms"
	write(bad)
	waitFor(t, "the bad config is refused", func() bool { return strings.Count(logs.String(), "config reload failed") > failed })
	if !strings.Contains(logs.String(), "jwks_min_refresh") {
		t.Errorf("the refusal does not say what was wrong:\n%s", logs.String())
	}
	if strings.Contains(metadata(), "provlog.tools.v3") {
		t.Error("a config that does not load changed the served auth:")
	}
	callTool(t, bs, "fx__append", map[string]any{"text": "bob 2"})

	cs.Close()
	bs.Close()
	stop()
	checkCallActors(t, readAll(t, filepath.Join(dir, "d")), map[string]string{"held": "idp:alice", "bob 1": "corp:bob", "bob 2": "corp:bob"}, "refused")
}

// metadataOf returns the sidecar's protected resource metadata.
func metadataOf(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + authn.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// checkCallActors checks that the call entry of each text (the sidefx
// downstream's argument) and its result carry the actor want names, and
// that no call of text never was written.
func checkCallActors(t *testing.T, entries []map[string]any, want map[string]string, never string) {
	t.Helper()
	got := map[string]string{}
	calls := map[float64]string{}
	for i, e := range entries {
		switch e["kind"] {
		case "call":
			args, _ := e["args"].(map[string]any)
			text, _ := args["text"].(string)
			if text == never {
				t.Errorf("the call %q was written", never)
			}
			got[text], _ = e["actor"].(string)
			calls[float64(i)] = text
		case "call.result":
			text := calls[e["call"].(float64)]
			if actor, _ := e["actor"].(string); actor != want[text] {
				t.Errorf("the result of call %q: actor %q, want %q", text, actor, want[text])
			}
		}
	}
	for text, actor := range want {
		if got[text] != actor {
			t.Errorf("call %q: actor %q, want %q", text, got[text], actor)
		}
	}
}
