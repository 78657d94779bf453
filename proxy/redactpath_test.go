package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactFieldPathRefused: a redact list that names a field by its
// path, as a JSON pointer (replay_ignore's form), names no member (a
// member is matched by its name, at any depth), so the value it was
// meant to redact would be written as the client sent it: the config is
// refused, with the member's name to list instead.
func TestRedactFieldPathRefused(t *testing.T) {
	const secret = "S3CRET-by-path-77"
	srv := mcp.NewServer(&mcp.Implementation{Name: "paths", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	for _, tc := range []struct{ field, want string }{
		{"/auth/password", `"password"`},
		{"/password", `"password"`},
		{"/auth/pass~1word~0x", `"pass/word~x"`},
	} {
		cfg := ServerConfig{ID: "rp", URL: down.URL, Redact: []string{tc.field}, Retain: RetainFull}
		if err := CheckServers([]ServerConfig{cfg}); err != nil {
			if !strings.Contains(err.Error(), "path") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("redact %q: %v, want it named a path, and %s to list", tc.field, err, tc.want)
			}
			continue
		}
		// Accepted: what a call writes.
		l := newTestLog(t)
		var logs lockedBuf
		p := startProxy(t, l, []ServerConfig{cfg}, func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		cs := connectMemory(t, p, nil)
		args := map[string]any{"auth": map[string]any{"password": secret, "pass/word~x": secret}, "password": secret}
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rp__login", Arguments: args}); err != nil {
			t.Fatal(err)
		}
		cs.Close()
		n := strings.Count(logs.String(), secret)
		for i := uint64(0); i < l.size(t); i++ {
			n += bytes.Count(l.entry(t, i), []byte(secret))
		}
		filepath.WalkDir(l.blobDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				n += bytes.Count(b, []byte(secret))
			}
			return nil
		})
		raw, _ := json.Marshal(args)
		t.Errorf("redact %q accepted: the value %s it names was written %d times", tc.field, raw, n)
	}
}
