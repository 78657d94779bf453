package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHealthSeesSkippedTool: a downstream lists a tool whose definition
// (16 MiB less 1 KiB) is past what a client's list page can give, so the sidecar
// leaves it out of the catalogue. The sidecar still records every call:
// /healthz says 200, but degraded, with reason catalogue_skipped naming
// the server, and its gauge is 1. It said "ok" (only the log and
// provlog__status's skipped_tools named it).
func TestHealthSeesSkippedTool(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "huge", Version: "1"}, nil)
	for _, tl := range []struct{ name, desc string }{{"a", "small"}, {"huge", strings.Repeat("d", 16<<20-1<<10)}} {
		srv.AddTool(&mcp.Tool{Name: tl.name, Description: tl.desc, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("data: ./d\nservers:\n  - id: big\n    url: %s\n", down.URL)), 0o600)
	base, _ := startServe(t, "--config", cfg)
	tok, _ := os.ReadFile(filepath.Join(dir, "d", localToken))
	waitTools(t, base, strings.TrimSpace(string(tok)), []string{"big__a"})
	h, code := getHealth(t, base)
	var found bool
	for _, r := range h.Reasons {
		if r.Reason == "catalogue_skipped" {
			found = strings.Contains(r.Detail, `"big"`) && strings.Contains(r.Detail, "1 tool")
		}
	}
	if code != http.StatusOK || h.Status != "degraded" || !found {
		t.Errorf("/healthz with a tool left out of the catalogue: %d %+v; want 200 degraded, reason catalogue_skipped naming server \"big\" and 1 tool", code, h)
	}
	if m := getMetrics(t, base); !strings.Contains(m, "\nprovlog_health_catalogue_skipped 1\n") {
		t.Errorf("metrics lack provlog_health_catalogue_skipped 1")
	}
}
