package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPServerForgetsSessions: a streamable HTTP server that restarts
// (here: its handler replaced, as a process restarted behind the same
// URL would be) forgets every session and answers the proxy's next POST
// 404. MCP says a client that gets 404 for its session starts a new one;
// the proxy must, so that calls after the restart reach the server.
func TestHTTPServerForgetsSessions(t *testing.T) {
	var ran atomic.Int64
	newHandler := func() http.Handler {
		srv := mcp.NewServer(&mcp.Implementation{Name: "forgetful", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "touch"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ran.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	var h atomic.Pointer[http.Handler]
	first := newHandler()
	h.Store(&first)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(down.Close)

	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "f", URL: down.URL}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	call := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__touch", Arguments: map[string]any{}})
		if err == nil && res.IsError {
			return fmt.Errorf("tool error: %v", res.Content)
		}
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	second := newHandler()
	h.Store(&second)
	const n = 6
	var failed []error
	for range n {
		if err := call(); err != nil {
			failed = append(failed, err)
		}
	}
	// The first call after the restart may fail (the server refused it:
	// 404, not run); every later one must reach the new server.
	t.Logf("after the restart: %d of %d calls failed, %d ran: %v", len(failed), n, ran.Load()-1, failed)
	if len(failed) > 1 {
		t.Errorf("after the server forgot its sessions, %d of %d calls failed (%d ran): %v", len(failed), n, ran.Load()-1, failed)
	}
}
