package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
}

// startServe runs 'provlog serve --http' in-process until the test ends.
func startServe(t *testing.T, args ...string) (base string, stop func()) {
	t.Helper()
	return startServeAt(t, freeAddr(t), args...)
}

// startServeAt is startServe on a given address.
func startServeAt(t *testing.T, addr string, args ...string) (base string, stop func()) {
	t.Helper()
	base, stop, _ = startServeLogged(t, addr, args...)
	return base, stop
}

// startServeLogged is startServeAt that also gives what serve logs.
func startServeLogged(t *testing.T, addr string, args ...string) (base string, stop func(), stderr *proctest.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &proctest.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve", "--http", addr}, args...), stderr, stderr) }()
	base = "http://" + addr
	cmdtest.WaitHealthy(t, base, done, stderr)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("serve exited with %d: %s", code, stderr.String())
			}
		})
	}
	t.Cleanup(stop)
	return base, stop, stderr
}

func connectHTTP(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to %s/mcp: %v", base, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its structured result and receipt.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, contentText(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	rc, _ := res.Meta["dev.provlog/receipt"].(string)
	return out, rc
}

func contentText(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func runCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), code
}

// TestServeHTTPEndToEnd runs the sidecar on its embedded defaults, drives
// the task tools over MCP with a real go-sdk client, checks the receipts
// with provlog's own commands, and audits the data dir after shutdown.
func TestServeHTTPEndToEnd(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	base, stop := startServe(t, "--data", data)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	if fi, err := os.Stat(filepath.Join(data, localToken)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("local.token mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Join(data, logKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("log.key mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	// Without a token: 401, for MCP and for entry contents; the checkpoint is public.
	for _, p := range []string{"/mcp", "/log/entry/0"} {
		resp, err := http.Post(base+p, "application/json", strings.NewReader("{}"))
		if p == "/log/entry/0" {
			resp, err = http.Get(base + p)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", p, resp.StatusCode)
		}
	}
	if resp, err := http.Get(base + "/log/checkpoint"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("checkpoint: %v %v", resp, err)
	}

	cs := connectHTTP(t, base, token)
	tools := map[string]bool{}
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = true
	}
	for _, want := range []string{"create_task", "accept_task", "report_completion", "handoff_task", "get_task_status", "list_unaccepted_tasks", "release_task", "cancel_task", "provlog__status", "provlog__prove", "provlog__verify"} {
		if !tools[want] {
			t.Errorf("tool %s is not listed", want)
		}
	}
	created, rc := callTool(t, cs, "create_task", map[string]any{"title": "check the build"})
	id, _ := created["task_id"].(string)
	if id == "" || rc == "" {
		t.Fatalf("create_task gave id %q, receipt %q: %v", id, rc, created)
	}
	_, rc2 := callTool(t, cs, "accept_task", map[string]any{"task_id": id})

	dir := t.TempDir()
	for i, r := range []string{rc, rc2} {
		f := filepath.Join(dir, fmt.Sprintf("r%d", i))
		os.WriteFile(f, []byte(r), 0o600)
		if out, code := runCmd(t, "verify-proof", "--vkey", filepath.Join(data, logVKeyFile), f); code != 0 {
			t.Fatalf("verify-proof of a task receipt: %s", out)
		}
	}
	rec, err := log.ParseReceipt([]byte(rc2))
	if err != nil {
		t.Fatal(err)
	}
	// The same entry proven through the running sidecar, and --data refused while it runs.
	t.Setenv("PROVLOG_TOKEN", token)
	out, code := runCmd(t, "prove", "--log", base, "--index", fmt.Sprint(rec.Index))
	if code != 0 || !strings.HasPrefix(out, log.ReceiptHeader) {
		t.Fatalf("prove --log: %d %s", code, out)
	}
	if out, code := runCmd(t, "prove", "--data", data, "--index", "0"); code != 1 || !strings.Contains(out, "--log") {
		t.Fatalf("prove --data on a running sidecar: %d %s; want a pointer to --log", code, out)
	}
	if out, code := runCmd(t, "tasks", "--log", base, "show", id); code != 0 || !strings.Contains(out, "accepted") || !strings.Contains(out, "not checked against the log's key") {
		t.Fatalf("tasks show over HTTP: %d %s", code, out)
	}
	if out, code := runCmd(t, "audit", "--log", base, "--vkey", filepath.Join(data, logVKeyFile)); code != 0 {
		t.Fatalf("audit --log: %s", out)
	}
	status, _ := callTool(t, cs, "provlog__status", nil)
	if status == nil {
		t.Fatal("provlog__status returned nothing")
	}
	cs.Close()
	stop()

	out, code = runCmd(t, "audit", "--data", data)
	if code != 0 || !strings.Contains(out, "1 tasks rebuilt") {
		t.Fatalf("audit --data: %d %s", code, out)
	}
	if out, code := runCmd(t, "tasks", "--data", data, "list"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("tasks list: %d %s", code, out)
	}
}

// TestTokenAdd makes a token for a new actor, which then acts as that actor.
func TestTokenAdd(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte("# my sidecar\ndata: "+filepath.Join(dir, "data")+"\n"), 0o600)
	out, code := runCmd(t, "token", "add", "--config", cfg, "--actor", "alice")
	if code != 0 {
		t.Fatalf("token add: %s", out)
	}
	token := strings.SplitN(out, "\n", 2)[0]
	b, _ := os.ReadFile(cfg)
	if strings.Contains(string(b), token) || !strings.Contains(string(b), "# my sidecar") {
		t.Fatalf("config after token add:\n%s", b)
	}
	base, _ := startServe(t, "--config", cfg)
	cs := connectHTTP(t, base, token)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "t"})
	got, _ := callTool(t, cs, "get_task_status", map[string]any{"task_id": created["task_id"]})
	if c, _ := json.Marshal(got); !strings.Contains(string(c), `"alice"`) {
		t.Fatalf("task created with alice's token does not name alice: %s", c)
	}
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+token+"x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
}

// TestServeStdio runs the real binary as a stdio MCP server.
func TestServeStdio(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	data := filepath.Join(t.TempDir(), "data")
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin, "serve", "--data", data)},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	created, rc := callTool(t, cs, "create_task", map[string]any{"title": "over stdio"})
	got, _ := callTool(t, cs, "get_task_status", map[string]any{"task_id": created["task_id"]})
	if b, _ := json.Marshal(got); !strings.Contains(string(b), `"local"`) {
		t.Fatalf("stdio actor is not the config's 'local': %s", b)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	f := filepath.Join(t.TempDir(), "r")
	os.WriteFile(f, []byte(rc), 0o600)
	if out, code := runCmd(t, "verify-proof", "--vkey", filepath.Join(data, logVKeyFile), f); code != 0 {
		t.Fatalf("verify-proof: %s", out)
	}
	// The process has exited and released the store.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, code := runCmd(t, "audit", "--data", data)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit after stdio session: %s", out)
		}
	}
}
