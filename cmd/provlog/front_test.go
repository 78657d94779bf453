package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startWithEverything runs the sidecar with go-sdk's everything-server as
// its stdio downstream (prefix "") and returns its base URL and token.
func startWithEverything(t *testing.T) (base, token string) {
	t.Helper()
	bin := os.Getenv("PROVLOG_EVERYTHING_SERVER")
	if _, err := os.Stat(bin); bin == "" || err != nil {
		msg := `PROVLOG_EVERYTHING_SERVER is not set; run: eval "$(bash tools/mcptest/install.sh)"`
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "provlog.yaml")
	text := fmt.Sprintf("data: %s\nservers:\n  - id: conf\n    command: [%q]\n    prefix: \"\"\n", data, bin)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ = startServe(t, "--config", cfg)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	return base, strings.TrimSpace(string(tok))
}

// logSize reads the log's size off its checkpoint.
func logSize(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		t.Fatalf("checkpoint: %q", b)
	}
	return lines[1]
}

// TestFrontHostEveryPath: on a loopback bind every path refuses a foreign
// Host, before anything is recorded. Before the front checked it, a
// tools/call on the HTTP fast path with Host: evil.example and a valid
// token was answered 200 and recorded (the SDK's path said 403).
func TestFrontHostEveryPath(t *testing.T) {
	base, token := startWithEverything(t)
	cs := connectHTTP(t, base, token)
	call := func(host string) (int, string) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	before := logSize(t, base)
	if code, body := call("evil.example"); code != http.StatusForbidden {
		t.Errorf("tools/call with Host evil.example: %d %s, want 403", code, body)
	}
	if after := logSize(t, base); after != before {
		t.Errorf("the refused call was recorded: log size %s, then %s", before, after)
	}
	if code, body := call(strings.TrimPrefix(base, "http://")); code != http.StatusOK || !strings.Contains(body, "dev.provlog/receipt") {
		t.Errorf("the same call with the right Host: %d %s", code, body)
	}
	for _, path := range []string{"/mcp", "/log/checkpoint", "/log/entry/0", "/log/anchors", "/healthz", "/metrics", "/nothing"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with Host evil.example: %d, want 403", path, resp.StatusCode)
		}
	}
}

// TestFrontOneBearerParser: /mcp and /log/ read the Authorization header
// alike (RFC 6750; /mcp took "bearer" and double spaces, /log/ did not).
func TestFrontOneBearerParser(t *testing.T) {
	base, token := startWithEverything(t)
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + token, true},
		{"bearer " + token, true},
		{"Bearer  " + token, true},
		{"Bearer\t" + token, false},
		{"Bearer " + token + " x", false},
		{"Basic " + token, false},
		{"Bearer x" + token, false},
	} {
		for _, path := range []string{"/mcp", "/log/entry/0"} {
			method, body := "GET", io.Reader(nil)
			if path == "/mcp" {
				method = "POST"
				body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
			}
			req, _ := http.NewRequestWithContext(context.Background(), method, base+path, body)
			req.Header.Set("Authorization", c.header)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.StatusCode != http.StatusUnauthorized; got != c.ok {
				t.Errorf("%s %s with %q: %d, want accepted=%v", method, path, strings.ReplaceAll(c.header, token, "TOKEN"), resp.StatusCode, c.ok)
			}
		}
	}
}
