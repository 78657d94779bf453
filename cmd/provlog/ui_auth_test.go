package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// TestAuthShown: the auth member of entries an OAuth token wrote (issuer,
// subject, client, act chain) is shown by the auditor's view in headless
// Chromium (the entry and its task's timeline), by `provlog tasks show`,
// and in the exported bundle's PROV document; none of them holds the
// token.
func TestAuthShown(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	is := authntest.Start(t)
	const res = "https://provlog.test/mcp"
	data := filepath.Join(dir, "d")
	b, _ := json.Marshal(map[string]any{ // JSON is YAML
		"data": data,
		"auth": map[string]any{"resource": res, "issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}},
		"servers": []map[string]any{{"id": "fx", "command": []string{exe, "-test.run=^$"},
			"env": map[string]string{sidefxEnv: filepath.Join(dir, "fx.txt")}}},
	})
	cfgPath := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, "--config", cfgPath)

	// A review agent acting for alice, through an orchestrator.
	claims := is.Claims(res, "alice")
	claims["client_id"] = "review-agent"
	claims["jti"] = "jti-ui-1"
	claims["act"] = map[string]any{"sub": "review-agent", "act": map[string]any{"sub": "orchestrator", "client_id": "orch"}}
	tok := is.Mint(t, claims)
	sum := sha256.Sum256([]byte(tok))
	tokSum := hex.EncodeToString(sum[:])
	cs := connectHTTP(t, base, tok)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "review the draft"})
	taskID := created["task_id"].(string)
	_, rc := callTool(t, cs, "accept_task", map[string]any{"task_id": taskID})
	receipt, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	reader := strings.TrimSpace(string(local))

	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", base, reader, receipt.Index))
	if v != "true" {
		t.Fatalf("the accept entry %d: data-verified=%s: %s", receipt.Index, v, txt)
	}
	var got struct {
		Auth, Timeline, HTML string
	}
	if err := p.Eval(ctx, `({Auth: document.querySelector("#entry dl.auth")?.innerText ?? "",
		Timeline: [...document.querySelectorAll("#timeline li")].map(li => li.innerText).join("\n"),
		HTML: document.documentElement.outerHTML})`, &got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{is.URL, "alice", "review-agent", "review-agent, for alice, through orchestrator (client orch)", "jti-ui-1", tokSum} {
		if !strings.Contains(got.Auth, want) {
			t.Errorf("the entry's auth block lacks %q:\n%s", want, got.Auth)
		}
	}
	if n := strings.Count(got.Timeline, "acted by review-agent through orchestrator (client orch), client review-agent"); n != 2 {
		t.Errorf("the timeline shows the act chain on %d steps, want 2 (create, accept):\n%s", n, got.Timeline)
	}
	if strings.Contains(got.HTML, tok) {
		t.Error("the page holds the token")
	}
	screenshot(t, ctx, p, "auditor-view-oauth.png")

	cs.Close()
	stop()
	checkAuthOffline(t, dir, data, taskID, tok, is.URL)
}

// checkAuthOffline checks the stopped sidecar's data dir: `provlog tasks
// show` prints the task's two steps' auth, the exported bundle's PROV
// document maps it, and neither the data dir nor the bundle holds the
// token.
func checkAuthOffline(t *testing.T, dir, data, taskID, tok, issuer string) {
	t.Helper()
	sum := sha256.Sum256([]byte(tok))
	tokSum := hex.EncodeToString(sum[:])
	out, code := runCmd(t, "tasks", "--data", data, "show", taskID)
	if code != 0 {
		t.Fatalf("tasks show: %s", out)
	}
	for _, want := range []string{"by idp:alice", "issuer      " + issuer, "subject     alice", "client      review-agent",
		"act         review-agent, acting for alice", "through   orchestrator (client orch)", "token jti   jti-ui-1", "SHA-256 " + tokSum} {
		if strings.Count(out, want) != 2 {
			t.Errorf("tasks show has %q %d times, want 2 (create, accept):\n%s", want, strings.Count(out, want), out)
		}
	}
	bundle := filepath.Join(dir, "bundle")
	if out, code := runCmd(t, "export", "--data", data, "--out", bundle); code != 0 {
		t.Fatalf("export: %s", out)
	}
	prov, err := os.ReadFile(filepath.Join(bundle, "provenance.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"provlog:authSubject":"alice"`, `"provlog:authClientId":"review-agent"`, "log:act/", "provlog:actingParty"} {
		if !strings.Contains(string(prov), want) {
			t.Errorf("provenance.json lacks %s", want)
		}
	}
	if out, code := runCmd(t, "verify-bundle", bundle); code != 0 {
		t.Errorf("verify-bundle: %s", out)
	}
	for _, where := range []string{data, bundle} {
		filepath.WalkDir(where, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(path); strings.Contains(string(b), tok) {
					t.Errorf("%s holds the token", path)
				}
			}
			return nil
		})
	}
}
