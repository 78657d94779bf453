package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/cmd/internal/cmdtest"
)

// connectStdio starts 'provlog serve ARGS' as a stdio MCP server in dir,
// as Claude Desktop does.
func connectStdio(t *testing.T, bin, dir string, args ...string) (*mcp.ClientSession, error) {
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestStdioJoinsSidecar: with the HTTP sidecar running (Claude Code), a
// stdio serve on the same config (Claude Desktop, started elsewhere)
// joins its log: one log holds both clients' calls, each under its actor.
func TestStdioJoinsSidecar(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./provlog-data\norigin: example.org/one-log\n"), 0o600)
	alice := addToken(t, cfg, "alice")
	base, stop := startServe(t, "--config", cfg)
	hs := connectHTTP(t, base, alice)
	byHTTP, _ := callTool(t, hs, "create_task", map[string]any{"title": "from Claude Code"})

	elsewhere := t.TempDir()
	ss, err := connectStdio(t, bin, elsewhere, "--config", cfg)
	if err != nil {
		t.Fatalf("stdio serve did not join the running sidecar: %v", err)
	}
	byStdio, rc := callTool(t, ss, "create_task", map[string]any{"title": "from Claude Desktop"})
	if rc == "" {
		t.Fatal("the joined stdio call carries no receipt")
	}
	got, _ := callTool(t, ss, "get_task_status", map[string]any{"task_id": byHTTP["task_id"]})
	if b, _ := json.Marshal(got); !strings.Contains(string(b), "from Claude Code") {
		t.Fatalf("the stdio client does not see the HTTP client's task: %s", b)
	}
	got, _ = callTool(t, hs, "get_task_status", map[string]any{"task_id": byStdio["task_id"]})
	if b, _ := json.Marshal(got); !strings.Contains(string(b), `"local"`) {
		t.Fatalf("the stdio client's task is not the stdio actor's (local): %s", b)
	}
	ss.Close()
	if des, _ := os.ReadDir(elsewhere); len(des) != 0 {
		t.Fatalf("the stdio serve made %s in its working directory", des[0].Name())
	}
	hs.Close()
	stop()
	data := filepath.Join(dir, "provlog-data")
	if _, err := os.Stat(filepath.Join(data, sidecarFile)); !os.IsNotExist(err) {
		t.Errorf("%s left behind after the sidecar stopped: %v", sidecarFile, err)
	}
	r := filepath.Join(t.TempDir(), "r")
	os.WriteFile(r, []byte(rc), 0o600)
	if out, code := runCmd(t, "verify-proof", "--vkey", filepath.Join(data, logVKeyFile), r); code != 0 {
		t.Fatalf("the stdio receipt does not verify against the one log: %s", out)
	}
	out, code := runCmd(t, "tasks", "--data", data, "list")
	if code != 0 || !strings.Contains(out, "from Claude Code") || !strings.Contains(out, "from Claude Desktop") {
		t.Fatalf("one log with both clients' tasks: %d\n%s", code, out)
	}
}

// TestStdioCannotServe: when a stdio serve can neither open the data dir
// nor join a sidecar, or its config is wrong, the MCP client's error says
// why instead of "connection closed".
func TestStdioCannotServe(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: ./d\n"), 0o600)
	// A stdio serve holds the data dir: it serves no HTTP to join.
	if _, err := connectStdio(t, bin, dir, "--config", cfg); err != nil {
		t.Fatal(err)
	}
	_, err := connectStdio(t, bin, dir, "--config", cfg)
	if err == nil || !strings.Contains(err.Error(), "serves no HTTP API") || !strings.Contains(err.Error(), "--http") {
		t.Fatalf("second stdio serve: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("servers:\n  - id: a\n    command: [x]\n    timeout: 60\n"), 0o600)
	_, err = connectStdio(t, bin, dir, "--config", bad)
	if err == nil || !strings.Contains(err.Error(), `line 4: servers[0].timeout: "60" has no unit`) {
		t.Fatalf("stdio serve with a bad config: %v", err)
	}
}

// TestStdioJoinIdle: a joined stdio client that makes no request for
// longer than the sidecar's sessions.idle keeps its session (the bridge
// pings it), as it would keep a session of its own; the sidecar closed
// it, and every later request said "it restarted; restart this MCP
// server" (Claude Desktop unused for ten minutes lost provlog).
func TestStdioJoinIdle(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.yaml")
	// The bridge pings every idle/3, so the session is lost only if the
	// bridge stalls for two thirds of idle: 2 s here, far beyond what a
	// loaded machine does to a process (400 ms gave it 270 ms).
	os.WriteFile(cfg, []byte("data: ./provlog-data\nsessions: {idle: 3s}\n"), 0o600)
	startServe(t, "--config", cfg)
	ss, err := connectStdio(t, bin, t.TempDir(), "--config", cfg)
	if err != nil {
		t.Fatalf("stdio serve did not join the running sidecar: %v", err)
	}
	callTool(t, ss, "list_unaccepted_tasks", map[string]any{})
	// Longer than idle and a reaper round (idle/4) after it: without the
	// pings, a reaper round would have found the session idle.
	time.Sleep(5 * time.Second)
	res, err := ss.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_unaccepted_tasks", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("after an idle while, the joined client's call failed: %v %v", err, res)
	}
}
