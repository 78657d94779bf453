package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	waitFor(t, "serve is up", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
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
