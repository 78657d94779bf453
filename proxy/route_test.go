package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerRequestsRideTheCallsStream: a downstream's sampling request
// during a call reaches the calling client on that call's own event
// stream, also when the client keeps no standalone stream open. The fast
// path answered such calls with JSON and sent the request on the
// standalone stream, so it failed ("undelivered message: stream not
// connected or already closed"; the conformance scenario
// tools-call-sampling failed in some runs).
func TestServerRequestsRideTheCallsStream(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, nil)
	srv := httptest.NewServer(p.HTTPHandler(staticTokens(func(tok string) (string, bool) { return testActor, tok == testToken })))
	t.Cleanup(srv.Close)
	asked := 0
	c := mcp.NewClient(&mcp.Implementation{Name: "sampler", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked++
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "four"}}, nil
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:             srv.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: &bearer{testToken, http.DefaultTransport}},
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	fastSession(t, p, cs)
	const n = 5
	for i := range n {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "go__test_sampling", Arguments: map[string]any{"prompt": "2+2?"}})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if res.IsError {
			t.Fatalf("call %d: tool error: %s", i, textOf(res))
		}
	}
	if asked != n {
		t.Errorf("the client was asked %d times, want %d", asked, n)
	}
	if p.FastCalls() != 0 {
		t.Errorf("%d calls of a sampling client took the fast path", p.FastCalls())
	}
}
