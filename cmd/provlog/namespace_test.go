package main

// An auth: issuer's actor namespace (its actor_prefix) stays its own on
// this data dir after a reload or a new config drops the issuer: the log
// holds its actors' entries and tasks, and a static token given an id in
// it would act as them. Namespaces are compared regardless of case, as a
// reader takes "IDP:alice" for "idp:alice".

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestIssuerNamespaceOutlivesIssuer(t *testing.T) {
	dir := t.TempDir()
	is := authntest.Start(t)
	addr := freeAddr(t)
	res := "http://" + addr + "/mcp"
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(cfg map[string]any) {
		cfg["data"] = filepath.Join(dir, "d")
		cfg["reload_interval"] = "50ms"
		b, _ := json.Marshal(cfg) // JSON is YAML
		if err := os.WriteFile(cfgPath+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	auth := map[string]any{"resource": res, "issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}}
	static := "static-token-for-idp-alice-0123456789"
	sum := sha256.Sum256([]byte(static))
	staticActor := func(id string) []map[string]any {
		return []map[string]any{{"id": id, "token_sha256": hex.EncodeToString(sum[:])}}
	}

	// Case: with the issuer configured, IDP:alice is its namespace too.
	write(map[string]any{"auth": auth, "actors": staticActor("IDP:alice")})
	if _, err := loadConfig(cfgPath); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("static actor IDP:alice beside issuer prefix idp: was taken (%v)", err)
	}

	write(map[string]any{"auth": auth})
	base, stop, logs := startServeLogged(t, addr, "--config", cfgPath)
	alice := connectHTTP(t, base, is.Mint(t, is.Claims(res, "alice")))
	task, _ := callTool(t, alice, "create_task", map[string]any{"title": "alice's"})
	if task == nil {
		t.Fatal("alice created no task")
	}
	alice.Close()

	// A reload drops the issuer and gives a static token alice's id.
	reloads := func() int {
		return strings.Count(logs.String(), "config reload failed") + strings.Count(logs.String(), "config reloaded")
	}
	for _, id := range []string{"idp:alice", "Idp:alice"} {
		before := reloads()
		write(map[string]any{"actors": staticActor(id)})
		waitFor(t, "the reload is refused or taken", func() bool { return reloads() > before })
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+static)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("after a reload dropping issuer idp:, a static token as %s: %s, want 401 (it would act as the OAuth actor idp:alice, tasks and all)", id, resp.Status)
		}
	}
	stop()
	// Nor does a restart take it.
	if _, err := loadConfig(cfgPath); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("a config whose static actor Idp:alice is in the namespace of an issuer this log had: %v, want it refused", err)
	}
}

// TestIssuerNamespaceFromLog: a data dir written before provlog listed
// its issuers' namespaces has none listed; the log's entries name the
// actors OAuth tokens acted as (their auth member), whose namespaces serve
// reserves from them on its first start.
func TestIssuerNamespaceFromLog(t *testing.T) {
	dir := t.TempDir()
	is := authntest.Start(t)
	addr := freeAddr(t)
	res := "http://" + addr + "/mcp"
	data := filepath.Join(dir, "d")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(cfg map[string]any) {
		cfg["data"] = data
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"auth": map[string]any{"resource": res, "issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}}})
	base, stop, _ := startServeLogged(t, addr, "--config", cfgPath)
	alice := connectHTTP(t, base, is.Mint(t, is.Claims(res, "alice")))
	callTool(t, alice, "create_task", map[string]any{"title": "alice's"})
	alice.Close()
	stop()
	// As an older provlog left it: no list of namespaces.
	if err := os.Remove(filepath.Join(data, authNamespacesFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("static-token-for-idp-alice-0123456789"))
	write(map[string]any{"actors": []map[string]any{{"id": "idp:Bob", "token_sha256": hex.EncodeToString(sum[:])}}})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr proctest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--http", addr, "--config", cfgPath}, &stderr, &stderr) }()
	for {
		select {
		case code := <-done:
			if code == 0 || !strings.Contains(stderr.String(), `"idp:"`) {
				t.Errorf("serve with static actor idp:Bob on a log of issuer idp:'s actors: exit %d, want it refused naming the namespace: %s", code, stderr.String())
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			cancel()
			<-done
			t.Fatal("serve took static actor idp:Bob on a log whose entries name issuer idp:'s actor idp:alice")
		}
	}
}

// TestIssuerNamespaceSharedLog: on one PostgreSQL log, sidecar B has a
// static token acting as idp:bob, and sidecar A, started after it,
// trusts issuer idp:. Once bob's OAuth token has acted through A, B
// refuses its static token as idp:bob (401), while it runs and when it
// starts again: the namespace is the log's, not a data dir's.
func TestIssuerNamespaceSharedLog(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	datas := sharedDataDirs(t, dir)
	is := authntest.Start(t)
	const res = "http://provlog.test/mcp"
	writeCfg := func(name string, cfg map[string]any) string {
		b, _ := json.Marshal(cfg) // JSON is YAML
		return writeFile(t, filepath.Join(dir, name), b)
	}
	cfgA := writeCfg("a.yaml", map[string]any{"auth": map[string]any{"resource": res,
		"issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}}})
	static := "static-token-for-idp-bob-0123456789"
	sum := sha256.Sum256([]byte(static))
	cfgB := writeCfg("b.yaml", map[string]any{"actors": []map[string]any{{"id": "idp:bob", "token_sha256": hex.EncodeToString(sum[:])}}})

	b := startSidecarProc(t, "--config", cfgB, "--data", datas[1], "--store", dsn)
	staticStatus := func() int {
		req, _ := http.NewRequest(http.MethodPost, b.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+static)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := staticStatus(); got == http.StatusUnauthorized {
		t.Fatalf("B refused its static token before any issuer was configured: %d", got)
	}
	a := startSidecarProc(t, "--config", cfgA, "--data", datas[0], "--store", dsn)

	bob := connectHTTP(t, a.base, is.Mint(t, is.Claims(res, "bob")))
	if task, _ := callTool(t, bob, "create_task", map[string]any{"title": "bob's, through A"}); task == nil {
		t.Fatal("bob created no task")
	}
	bob.Close()

	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = staticStatus(); got == http.StatusUnauthorized {
			break
		}
	}
	if got != http.StatusUnauthorized {
		t.Errorf("B's static token as idp:bob, after A wrote OAuth actor idp:bob's entries to the shared log: %d, want 401 (it would act as bob, tasks and all)", got)
	}

	b.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr proctest.Buffer
	if code := run(ctx, []string{"serve", "--http", freeAddr(t), "--config", cfgB, "--data", datas[1], "--store", dsn}, &stderr, &stderr); code == 0 || !strings.Contains(stderr.String(), `"idp:"`) {
		t.Errorf("B started again with static actor idp:bob on a log naming OAuth actor idp:bob: exit %d, want it refused naming namespace idp:: %s", code, stderr.String())
	}
}

// TestIssuerNamespaceFromLogUnknown: an actor mapped from another claim
// than sub (actor_claim: email) does not tell its prefix, since entries
// keep sub and not the email. The first start on an older data dir says
// so, naming the issuer and what the operator can do.
func TestIssuerNamespaceFromLogUnknown(t *testing.T) {
	dir := t.TempDir()
	is := authntest.Start(t)
	addr := freeAddr(t)
	res := "http://" + addr + "/mcp"
	data := filepath.Join(dir, "d")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(cfg map[string]any) {
		cfg["data"] = data
		b, _ := json.Marshal(cfg)
		writeFile(t, cfgPath, b)
	}
	write(map[string]any{"auth": map[string]any{"resource": res, "issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "kc:", "actor_claim": "email"}}}})
	_, stop, _ := startServeLogged(t, addr, "--config", cfgPath)
	claims := is.Claims(res, "f81d4fae-7dec-11d0-a765-00a0c91e6bf6")
	claims["email"], claims["email_verified"] = "alice@acme.example", true
	alice := connectHTTP(t, "http://"+addr, is.Mint(t, claims))
	callTool(t, alice, "create_task", map[string]any{"title": "alice's"})
	alice.Close()
	stop()
	if err := os.Remove(filepath.Join(data, authNamespacesFile)); err != nil {
		t.Fatal(err)
	}
	write(map[string]any{})
	_, stop, logs := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	stop()
	if out := logs.String(); !strings.Contains(out, is.URL) || !strings.Contains(out, authNamespacesFile) {
		t.Errorf("the first start on a log of an email-mapped actor does not name its issuer %s and what to do:\n%s", is.URL, out)
	}
}
