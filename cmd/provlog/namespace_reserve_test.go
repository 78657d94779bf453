package main

// On a shared log an OAuth issuer's actor namespace is the log's from
// the moment a sidecar is configured with the issuer, not from its
// actors' first entry: the other sidecars refuse a static token, a stdio
// actor or a config in it, and a sidecar refuses to take an issuer whose
// namespace static actors already wrote in.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// nsFixture is a shared log, an issuer, and configs for two sidecars: A
// trusts the issuer with actor_prefix idp:, B has a static token acting
// as idp:bob.
type nsFixture struct {
	dsn           string
	datas         [2]string
	is            *authntest.Issuer
	cfgA, cfgB    string
	static        string
	dir, resource string
}

func newNSFixture(t *testing.T, bExtra map[string]any) *nsFixture {
	t.Helper()
	f := &nsFixture{dsn: pgtest.DSN(t), dir: t.TempDir(), is: authntest.Start(t), resource: "http://provlog.test/mcp"}
	f.datas = sharedDataDirs(t, f.dir)
	write := func(name string, cfg map[string]any) string {
		b, _ := json.Marshal(cfg) // JSON is YAML
		return writeFile(t, filepath.Join(f.dir, name), b)
	}
	f.cfgA = write("a.yaml", map[string]any{"auth": map[string]any{"resource": f.resource,
		"issuers": []map[string]any{{"issuer": f.is.URL, "jwks_url": f.is.JWKSURL(), "actor_prefix": "idp:"}}}})
	f.static = "static-token-for-idp-bob-0123456789"
	sum := sha256.Sum256([]byte(f.static))
	cfgB := map[string]any{"actors": []map[string]any{{"id": "idp:bob", "token_sha256": hex.EncodeToString(sum[:])}}}
	for k, v := range bExtra {
		cfgB[k] = v
	}
	f.cfgB = write("b.yaml", cfgB)
	return f
}

func (f *nsFixture) startA(t *testing.T) *sidecarProc {
	return startSidecarProc(t, "--config", f.cfgA, "--data", f.datas[0], "--store", f.dsn)
}

func (f *nsFixture) startB(t *testing.T) *sidecarProc {
	return startSidecarProc(t, "--config", f.cfgB, "--data", f.datas[1], "--store", f.dsn)
}

// pingStatus is the status of a ping to base's /mcp with token.
func pingStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// serveOnce runs serve with args in this process until it serves (then
// it is stopped) or exits, and says which, with its exit code and output.
func serveOnce(t *testing.T, args ...string) (served bool, code int, out string) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr proctest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve", "--http", addr}, args...), &stderr, &stderr) }()
	for {
		select {
		case code := <-done:
			return false, code, stderr.String()
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			cancel()
			return true, <-done, stderr.String()
		}
	}
}

// TestIssuerNamespaceReservedUnused: sidecar A is configured with issuer
// idp: and none of its actors has written anything. Sidecar B of the same
// PostgreSQL log, running with a static token as idp:bob, refuses it
// (401) once A has started, and refuses to start again with it: the
// namespace is reserved by the log's own record of it, not by its actors'
// entries.
func TestIssuerNamespaceReservedUnused(t *testing.T) {
	f := newNSFixture(t, nil)
	b := f.startB(t)
	if got := pingStatus(t, b.base, f.static); got != http.StatusOK {
		t.Fatalf("B's static token before any issuer was configured: %d, want 200", got)
	}
	f.startA(t)
	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = pingStatus(t, b.base, f.static); got == http.StatusUnauthorized {
			break
		}
	}
	if got != http.StatusUnauthorized {
		t.Errorf("B's static token as idp:bob, after A started with issuer idp: (no OAuth actor has written): %d, want 401", got)
	}
	b.kill()
	if served, code, out := serveOnce(t, "--config", f.cfgB, "--data", f.datas[1], "--store", f.dsn); served || !strings.Contains(out, `"idp:"`) {
		t.Errorf("B started again with static actor idp:bob on a log where A reserved issuer namespace idp:: served %v, exit %d, want it refused naming namespace idp:: %s", served, code, out)
	}
}

// TestIssuerNamespaceNoWindow: no request of B's static token as idp:bob
// is taken once A, starting with issuer idp:, serves: B has read A's
// reservation by then.
func TestIssuerNamespaceNoWindow(t *testing.T) {
	f := newNSFixture(t, nil)
	b := f.startB(t)
	if got := pingStatus(t, b.base, f.static); got != http.StatusOK {
		t.Fatalf("B's static token before any issuer was configured: %d, want 200", got)
	}
	a := f.startA(t)
	taken := 0
	for range 20 {
		if pingStatus(t, b.base, f.static) != http.StatusUnauthorized {
			taken++
		}
		time.Sleep(10 * time.Millisecond)
	}
	if taken > 0 {
		t.Errorf("B took %d of 20 requests of its static token as idp:bob after A began to serve issuer idp: (in which OAuth idp:bob may act through A)", taken)
	}
	// And one of A's OAuth actors acts.
	bob := connectHTTP(t, a.base, f.is.Mint(t, f.is.Claims(f.resource, "bob")))
	if task, _ := callTool(t, bob, "create_task", map[string]any{"title": "bob's, through A"}); task == nil {
		t.Fatal("bob created no task")
	}
}

// TestIssuerNamespaceStdioActor: sidecar B serves MCP over stdio as actor
// idp:bob (its config's actor:). Once the shared log names OAuth actor
// idp:bob, mapped by issuer idp: through sidecar A, B refuses the stdio
// client's calls: they would be recorded as that OAuth actor, tasks and
// all.
func TestIssuerNamespaceStdioActor(t *testing.T) {
	f := newNSFixture(t, nil)
	cfgB := writeFile(t, filepath.Join(f.dir, "b-stdio.yaml"), []byte(`{"actor": "idp:bob"}`))
	argv, _ := json.Marshal([]string{"serve", "--config", cfgB, "--data", f.datas[1], "--store", f.dsn})
	cmd := childCmd(t, serveChildEnv+"="+string(argv))
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	cs := connectStdioChild(t, cmd)
	// A read: an entry by static idp:bob would have A refuse the issuer.
	if _, _, err := toolCall(cs, "list_unaccepted_tasks", map[string]any{}); err != nil {
		t.Fatalf("B's stdio client before any issuer: %v\n%s", err, stderr.String())
	}

	a := f.startA(t)
	bob := connectHTTP(t, a.base, f.is.Mint(t, f.is.Claims(f.resource, "bob")))
	if task, _ := callTool(t, bob, "create_task", map[string]any{"title": "bob's, through A"}); task == nil {
		t.Fatal("bob created no task")
	}
	waitFor(t, "B reads the namespace idp: from the shared log", func() bool {
		return strings.Contains(stderr.String(), "not reserved here before")
	})
	if res, _, err := toolCall(cs, "create_task", map[string]any{"title": "as idp:bob, over stdio"}); err == nil {
		t.Errorf("B's stdio client, actor idp:bob, after the shared log named OAuth actor idp:bob: create_task took (%v), want it refused", res)
	}
}

// connectStdioChild starts cmd, a provlog serve child over stdio, and
// connects an MCP client to it.
func connectStdioChild(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-ns", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	return cs
}

// TestIssuerNamespaceStaticEntriesBefore: sidecar B's static token as
// idp:bob wrote a task in the shared log; sidecar A started with issuer
// idp: would have OAuth idp:bob act as that static actor, its tasks and
// all. A refuses to start, naming the actor and its entry, and writes
// nothing.
func TestIssuerNamespaceStaticEntriesBefore(t *testing.T) {
	f := newNSFixture(t, nil)
	b := f.startB(t)
	static := connectHTTP(t, b.base, f.static)
	if task, _ := callTool(t, static, "create_task", map[string]any{"title": "static idp:bob's"}); task == nil {
		t.Fatal("static idp:bob created no task")
	}
	static.Close()
	size := func() string {
		resp, err := http.Get(b.base + "/log/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf strings.Builder
		if _, err := io.Copy(&buf, resp.Body); err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(buf.String(), "\n", 3)
		if len(lines) < 2 {
			t.Fatalf("checkpoint: %q", buf.String())
		}
		return lines[1]
	}
	before := size()
	served, code, out := serveOnce(t, "--config", f.cfgA, "--data", f.datas[0], "--store", f.dsn)
	if served || !strings.Contains(out, `idp:bob`) || !strings.Contains(out, `"idp:"`) {
		t.Errorf("A started with issuer idp: on a log where static actor idp:bob wrote a task: served %v, exit %d, want it refused naming idp:bob and namespace idp:: %s", served, code, out)
	}
	if after := size(); after != before {
		t.Errorf("A's refused start wrote to the log: size %s -> %s", before, after)
	}
}

// TestIssuerNamespaceStaticEntriesBeforeReload: a reload that drops the
// static token of idp:bob, who wrote a task, and adds issuer idp: is
// refused, naming idp:bob; the running config stays.
func TestIssuerNamespaceStaticEntriesBeforeReload(t *testing.T) {
	dir := t.TempDir()
	is := authntest.Start(t)
	addr := freeAddr(t)
	cfgPath := filepath.Join(dir, "provlog.yaml")
	write := func(cfg map[string]any) {
		cfg["data"] = filepath.Join(dir, "d")
		cfg["reload_interval"] = "50ms"
		b, _ := json.Marshal(cfg) // JSON is YAML
		writeFile(t, cfgPath+".new", b)
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	static := "static-token-for-idp-bob-0123456789"
	sum := sha256.Sum256([]byte(static))
	write(map[string]any{"actors": []map[string]any{{"id": "idp:bob", "token_sha256": hex.EncodeToString(sum[:])}}})
	base, stop, logs := startServeLogged(t, addr, "--config", cfgPath)
	bob := connectHTTP(t, base, static)
	if task, _ := callTool(t, bob, "create_task", map[string]any{"title": "static idp:bob's"}); task == nil {
		t.Fatal("static idp:bob created no task")
	}
	bob.Close()
	reloads := func() int {
		return strings.Count(logs.String(), "config reload failed") + strings.Count(logs.String(), "config reloaded")
	}
	before := reloads()
	write(map[string]any{"auth": map[string]any{"resource": "http://" + addr + "/mcp",
		"issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}}})
	waitFor(t, "the reload is refused or taken", func() bool { return reloads() > before })
	stop()
	out := logs.String()
	if !strings.Contains(out, "config reload failed") || !strings.Contains(out, "idp:bob") {
		t.Errorf("a reload adding issuer idp: to a log where static idp:bob wrote a task: want it refused naming idp:bob:\n%s", out)
	}
}

// TestIssuerNamespaceReservedAfterUpgrade: sidecar A's data dir lists
// issuer idp:'s namespace from before namespace entries were written
// (auth-namespaces, as an older provlog left it), and the shared log holds
// no namespace entry for it. A's start writes one all the same, so B, of
// the same log, refuses its static token as idp:bob.
func TestIssuerNamespaceReservedAfterUpgrade(t *testing.T) {
	f := newNSFixture(t, nil)
	writeFile(t, filepath.Join(f.datas[0], authNamespacesFile), []byte(`"idp:"`+"\n"))
	b := f.startB(t)
	if got := pingStatus(t, b.base, f.static); got != http.StatusOK {
		t.Fatalf("B's static token before any issuer was configured: %d, want 200", got)
	}
	f.startA(t)
	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = pingStatus(t, b.base, f.static); got == http.StatusUnauthorized {
			break
		}
	}
	if got != http.StatusUnauthorized {
		t.Errorf("B's static token as idp:bob, after A started with issuer idp:, listed in its data dir from before: %d, want 401", got)
	}
}
