package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestREADMEOneLog: the README's recipe for Claude Code (HTTP) and Claude
// Desktop (stdio) on one machine gives one log with both clients' calls.
// The apps cannot run here; in their place runs the official TypeScript
// MCP client (tools/mcptest/client.mjs), with what each app is told:
//
//   - the README's servers.yaml, as written but for what needs a network:
//     its everything server's npx download is the npm install the tests
//     use, and its remote server's URL is a streamable HTTP server in this
//     test (its headers: line stays);
//   - the README's `token add` and `serve` lines, run by bash in the
//     config's directory (on a free port);
//   - Claude Code: the URL and the --header of its `claude mcp add` line
//     (the header's $(cat …) run by bash in the same directory);
//   - Claude Desktop: the command and args of its claude_desktop_config.json
//     (the config's real path for /path/to/servers.yaml), started from
//     another directory with the installed provlog on PATH.
func TestREADMEOneLog(t *testing.T) {
	const section = "In front of your MCP servers"
	node, err := exec.LookPath("node")
	if err != nil {
		missingPrereq(t, "node is not installed")
	}
	mods := filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules")
	everything := filepath.Join(mods, "@modelcontextprotocol/server-everything/dist/index.js")
	for _, p := range []string{everything, filepath.Join(mods, "@modelcontextprotocol/sdk")} {
		if _, err := os.Stat(p); err != nil {
			missingPrereq(t, fmt.Sprintf("the npm MCP packages are not installed (%v)", err))
		}
	}
	bin := cmdtest.Build(t, "provlog")
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")

	// The config, in a directory of its own.
	dir := t.TempDir()
	yaml := readmeFenced(t, section, "yaml")[0]
	for old, repl := range map[string]string{
		`[npx, -y, "@modelcontextprotocol/server-everything", stdio]`: fmt.Sprintf("[%q, %q, stdio]", node, everything),
		"https://mcp.example.org/mcp":                                 remoteServer(t),
	} {
		if !strings.Contains(yaml, old) {
			t.Fatalf("the README's servers.yaml has no %s", old)
		}
		yaml = strings.ReplaceAll(yaml, old, repl)
	}
	cfg := filepath.Join(dir, "servers.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	// token add and serve, as written.
	addr := freeAddr(t)
	base := "http://" + addr
	stopServe := readmeServe(t, section, dir, path, addr)

	// Claude Code: the URL and header of its line.
	url, token := readmeClaudeCode(t, section, dir, path, addr)
	tsClient(t, t.TempDir(), path, map[string]any{
		"transport": "http", "url": url, "token": token, "name": "claude-code",
		"steps": []map[string]any{
			{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "from Claude Code"}},
			{"op": "callTool", "name": "remote__hello", "arguments": map[string]any{}},
		},
	})

	// Claude Desktop: the command and args of its JSON, from elsewhere.
	command, args := readmeClaudeDesktop(t, section, cfg)
	elsewhere := t.TempDir()
	tsClient(t, elsewhere, path, map[string]any{
		"transport": "stdio", "command": command, "args": args, "name": "claude-desktop",
		"steps": []map[string]any{
			{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "from Claude Desktop"}},
		},
	})
	des, _ := os.ReadDir(elsewhere)
	for _, de := range des {
		if de.Name() != "client.mjs" && de.Name() != "node_modules" {
			t.Errorf("the stdio serve wrote %s into its working directory", de.Name())
		}
	}

	// One log: both clients' calls, under the one origin.
	calls := callsByClient(t, base, token)
	for client, want := range map[string]string{"claude-code": `{"message":"from Claude Code"}`, "claude-desktop": `{"message":"from Claude Desktop"}`} {
		if !strings.Contains(strings.Join(calls[client], " "), want) {
			t.Errorf("the log holds no call from %s with %s; calls by client: %v", client, want, calls)
		}
	}
	if !strings.Contains(strings.Join(calls["claude-code"], " "), "remote/hello") {
		t.Errorf("the log holds no call of the remote server's tool: %v", calls)
	}
	stopServe()
	if out, code := runCmd(t, "audit", "--data", filepath.Join(dir, "provlog-data")); code != 0 || !strings.Contains(out, "OK: provlog.example/agent-7") {
		t.Fatalf("audit of the one log: %d\n%s", code, out)
	}
}

// readmeServe runs the README's token add and serve lines (section's
// first command block) by bash in dir, serve on addr, and returns what
// stops serve (with SIGINT) and checks that it exited well.
func readmeServe(t *testing.T, section, dir, path, addr string) (stop func()) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(readmeBlocks(t, section)[0]), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "provlog token add ") || !strings.HasPrefix(lines[1], "provlog serve ") {
		t.Fatalf("the README's commands after servers.yaml: %q, want token add and serve", lines)
	}
	if out, err := bashIn(dir, path, lines[0]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	stderr := &proctest.Buffer{}
	serve := bashIn(dir, path, "exec "+strings.ReplaceAll(lines[1], "127.0.0.1:8080", addr))
	serve.Stdout, serve.Stderr = stderr, stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		serve.Process.Kill()
		<-exited
	})
	cmdtest.WaitHealthy(t, "http://"+addr, exited, stderr)
	return func() {
		serve.Process.Signal(os.Interrupt)
		if err := <-exited; err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
		exited <- nil // for the cleanup
	}
}

// readmeClaudeCode returns the URL (on addr) and bearer token of the
// README's claude mcp add line, its header's $(…) run by bash in dir.
func readmeClaudeCode(t *testing.T, section, dir, path, addr string) (url, token string) {
	t.Helper()
	code := readmeBlocks(t, section)[1]
	m := regexp.MustCompile(`^claude mcp add --transport http provlog (\S+) \\\n\s+--header ("[^"]*")\n$`).FindStringSubmatch(code)
	if m == nil {
		t.Fatalf("the README's Claude Code line %q is not the one this test knows", code)
	}
	header, err := bashIn(dir, path, "printf %s "+m[2]).Output()
	if err != nil {
		t.Fatalf("the Claude Code header %s: %v", m[2], err)
	}
	token, ok := strings.CutPrefix(string(header), "Authorization: Bearer ")
	if !ok || token == "" {
		t.Fatalf("the Claude Code header is %q", header)
	}
	return strings.ReplaceAll(m[1], "127.0.0.1:8080", addr), token
}

// readmeClaudeDesktop returns the command and args of the README's
// claude_desktop_config.json, with cfg for its /path/to/servers.yaml.
func readmeClaudeDesktop(t *testing.T, section, cfg string) (string, []string) {
	t.Helper()
	var desktop struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readmeFenced(t, section, "json")[0]), &desktop); err != nil {
		t.Fatalf("the README's claude_desktop_config.json: %v", err)
	}
	entry, ok := desktop.MCPServers["provlog"]
	if !ok {
		t.Fatalf("the README's claude_desktop_config.json has no provlog server: %+v", desktop)
	}
	for i, a := range entry.Args {
		if a == "/path/to/servers.yaml" {
			entry.Args[i] = cfg
		}
	}
	return entry.Command, entry.Args
}

// bashIn is a bash running script in dir with PATH path.
func bashIn(dir, path, script string) *exec.Cmd {
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path)
	return cmd
}

// remoteServer is a streamable HTTP MCP server with one tool, hello.
func remoteServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// tsClient runs this checkout's tools/mcptest/client.mjs with plan in
// dir, beside the npm install's node_modules, and fails unless every step
// got a result with a receipt.
func tsClient(t *testing.T, dir, path string, plan map[string]any) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "tools", "mcptest", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "client.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(os.Getenv("PROVLOG_MCPTEST_DIR"), "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(plan)
	cmd := exec.Command("node", script, string(b))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s client: %v\n%s\n%s", plan["name"], err, out, stderr.String())
	}
	var report struct {
		Steps []struct {
			OK     bool `json:"ok"`
			Result struct {
				IsError bool           `json:"isError"`
				Meta    map[string]any `json:"_meta"`
			} `json:"result"`
			Error any `json:"error"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(out, &report); err != nil || len(report.Steps) == 0 {
		t.Fatalf("%s client printed %q: %v\n%s", plan["name"], out, err, stderr.String())
	}
	for i, s := range report.Steps {
		if !s.OK || s.Result.IsError || s.Result.Meta["dev.provlog/receipt"] == nil {
			t.Errorf("%s client, step %d: %s", plan["name"], i, out)
		}
	}
}

// callsByClient reads the whole log from the sidecar at base and returns
// its call entries as "server/tool args", by the client that made them.
func callsByClient(t *testing.T, base, token string) map[string][]string {
	t.Helper()
	size, err := strconv.ParseUint(logSize(t, base), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string][]string{}
	for i := uint64(0); i < size; i++ {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/log/entry/%d", base, i), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("entry %d: HTTP %d %s", i, resp.StatusCode, b)
		}
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if e.Kind != log.KindCall {
			continue
		}
		c, err := log.ParseCall(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		client := ""
		if c.Client != nil {
			client = c.Client.Name
		}
		calls[client] = append(calls[client], c.Server+"/"+c.Tool+" "+string(c.Args))
	}
	return calls
}
