package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallHTTP: one tools/call (a 1 KiB echo) through the proxy's
// HTTP front to a stateful streamable HTTP server, recorded in a memory
// log (so the store's cost is not in it; the sequencer's is). The client
// and the server run in this process too, so ns/op is not the proxy's
// alone: read -cpuprofile for that. The direct sub-benchmark calls the
// same server without the proxy, for the difference.
//
//	go test ./proxy -run '^$' -bench CallHTTP -cpuprofile /tmp/cpu.out
func BenchmarkCallHTTP(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + string(req.Params.Arguments)}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(down.Close)
	args := map[string]any{"message": strings.Repeat("x", 1024)}
	// connect closes the session when the (sub-)benchmark b ends, before
	// the servers it reaches: a session closed by the parent instead kept
	// its standalone stream open, and the front's httptest.Server.Close
	// waited for it for ever.
	connect := func(b *testing.B, url string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	run := func(b *testing.B, cs *mcp.ClientSession, tool string) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, connect(b, down.URL), "echo") })
	b.Run("proxied", func(b *testing.B) {
		l := newTestLog(b)
		p := startProxy(b, l, []ServerConfig{{ID: "e", URL: down.URL}}, nil)
		cs := fastSession(b, p, connect(b, serveHTTP(b, p)))
		run(b, cs, "e__echo")
		if p.fastCalls.Load() == 0 {
			b.Error("no call took the fast path")
		}
	})
}
