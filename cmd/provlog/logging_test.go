package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// serveLogs runs serve with a config until one MCP session came and went,
// and returns its stderr.
func serveLogs(t *testing.T, cfgText string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(cfgText), 0o600)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr proctest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfg, "--http", addr}, &stderr, &stderr) }()
	base := "http://" + addr
	cmdtest.WaitHealthy(t, base, done, &stderr)
	tok, _ := os.ReadFile(filepath.Join(dir, "d", localToken))
	cs := connectHTTP(t, base, strings.TrimSpace(string(tok)))
	callTool(t, cs, "list_unaccepted_tasks", map[string]any{})
	cs.Close()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr.String())
	}
	return stderr.String()
}

// TestLogStream: the go-sdk's session lines stay out of stderr at the
// default level, and come tagged at debug; json makes one JSON object a
// line.
func TestLogStream(t *testing.T) {
	out := serveLogs(t, "data: ./d\n")
	if strings.Contains(out, "session initialized") || strings.Contains(out, "server connecting") {
		t.Fatalf("the SDK's session lines are on stderr at info:\n%s", out)
	}
	if !strings.Contains(out, `msg="provlog serving"`) {
		t.Fatalf("the sidecar's own lines are missing:\n%s", out)
	}
	out = serveLogs(t, "data: ./d\nlog: {level: debug, format: json}\n")
	sdk := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m["msg"] == "session initialized" {
			sdk++
			if m["level"] != "DEBUG" || m["component"] != "mcp-sdk" {
				t.Errorf("SDK line not demoted and tagged: %s", l)
			}
		}
	}
	if sdk == 0 {
		t.Fatalf("at debug, the SDK's session lines are missing:\n%s", out)
	}
	if _, err := loadConfig(writeConfig(t, t.TempDir(), "log: {level: loud}\n")); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad log level: %v", err)
	}
}

// TestLogListChangedQuiet: a client need not keep a stream open for the
// server's notifications, and one that does not misses every
// list_changed. The go-sdk warns for each such session at each change (a
// reload adding a server, a downstream's restart): with 140 sessions and a
// reload every 3 s a soak wrote 45,000 such lines, 8.6 MB, in 7 minutes,
// at the default level. They are per-session lines, so DEBUG.
func TestLogListChangedQuiet(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	cfg := filepath.Join(dir, "provlog.yaml")
	write := func(servers string) {
		text := "data: ./d\nreload_interval: 50ms\nlog: {level: debug}\nservers: [" + servers + "]\n"
		os.WriteFile(cfg+".new", []byte(text), 0o600)
		os.Rename(cfg+".new", cfg)
	}
	write("")
	base, _, stderr := startServeLogged(t, freeAddr(t), "--config", cfg)
	tok, _ := os.ReadFile(filepath.Join(dir, "d", localToken))
	// Sessions as a client that opens no GET stream has them.
	post := func(session string, body string) string {
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Mcp-Session-Id")
	}
	for range 3 {
		id := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	write(fmt.Sprintf(`{id: fx, command: [%q, "-test.run=^$"], env: {%s: %q}}`, exe, sidefxEnv, filepath.Join(dir, "fx.txt")))
	const line = `msg="calling notifications/tools/list_changed: `
	waitFor(t, "the sessions were told the tools changed", func() bool { return strings.Contains(stderr.String(), line) })
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, line) && (!strings.Contains(l, "level=DEBUG") || !strings.Contains(l, "component=mcp-sdk")) {
			t.Fatalf("a session's missed notification is not a DEBUG line of the SDK's: %s", l)
		}
	}
}
