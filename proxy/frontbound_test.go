package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nearBoundServer is a server whose tool "big" and resource
// file:///big answer with a text that makes its answer a few bytes under
// maxEventBytes, as go-sdk frames it in an event.
func nearBoundServer(t *testing.T) string {
	t.Helper()
	// {"jsonrpc":"2.0","id":N,"result":{"content":[{"type":"text","text":"..."}]}}
	// within "event: message\nid: ...\ndata: ...\n\n": 300 bytes spare.
	text := strings.Repeat("x", maxEventBytes-300)
	srv := mcp.NewServer(&mcp.Implementation{Name: "near", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	// A result that, with its receipt (some 400 bytes), is some 200 bytes
	// under (maxEventBytes - 1<<10): passed on as ever.
	fits := strings.Repeat("y", (maxEventBytes-1<<10)-len(`{"content":[{"type":"text","text":""}]}`)-400-200)
	srv.AddTool(&mcp.Tool{Name: "fits", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fits}}}, nil
	})
	srv.AddResource(&mcp.Resource{Name: "big", URI: "file:///big"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	return down.URL
}

// TestAnswerPastClientBound: a result a few bytes under the 16 MiB bound
// of an event (and of a stdio line), that a go-sdk client takes straight
// from the server, grows past it with provlog's receipt and URI prefix.
// The client must keep its session: it gets a JSON-RPC error saying why,
// the result stays recorded, and the next call on the same session is
// answered.
func TestAnswerPastClientBound(t *testing.T) {
	url := nearBoundServer(t)
	ctx := context.Background()

	// Straight from the server, the go-sdk client takes both.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxEventSize: mcp.DefaultMaxEventSize}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if res, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "big"}); err != nil || res.IsError {
		t.Fatalf("the call straight to the server: %v", err)
	}
	if _, err := direct.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///big"}); err != nil {
		t.Fatalf("the read straight from the server: %v", err)
	}

	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "b", URL: url}}, nil)
	for _, front := range bothFronts(t, p) {
		cs := front.cs()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__fits"})
		if err != nil || len(textOf(res)) != (maxEventBytes-1<<10)-639 || metaReceipt(res.Meta) == "" {
			t.Fatalf("%s front: the call whose answer fits: %v; want its text whole, with its receipt", front.name, err)
		}
		before := l.size(t)
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__big"})
		t.Logf("%s front, tools/call: %v", front.name, err)
		if err == nil || !strings.Contains(err.Error(), "MiB") {
			t.Errorf("%s front: the call whose answer grew past 16 MiB: %v; want an error saying why", front.name, err)
		}
		if got := l.size(t) - before; got != 2 {
			t.Errorf("%s front: the call left %d entries; want 2 (the call and its call.result)", front.name, got)
		}
		before = l.size(t)
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "b+file:///big"})
		t.Logf("%s front, resources/read: %v", front.name, err)
		if err == nil || !strings.Contains(err.Error(), "MiB") {
			t.Errorf("%s front: the read whose answer grew past 16 MiB: %v; want an error saying why", front.name, err)
		}
		if l.size(t) == before {
			t.Errorf("%s front: the read left nothing in the log; want it recorded", front.name)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("%s front: the session after the refused answers: %v; want it kept", front.name, err)
		}
	}
}

// A testFront connects a client to one of a proxy's fronts.
type testFront struct {
	name string
	cs   func() *mcp.ClientSession
}

// bothFronts is p's pipe front (in memory) and its HTTP front, whose
// client takes events as go-sdk's does by default (boundedHTTPClient).
func bothFronts(t *testing.T, p *Proxy) []testFront {
	return []testFront{
		{"stdio", func() *mcp.ClientSession { return connectMemory(t, p, nil) }},
		{"http", func() *mcp.ClientSession { return boundedHTTPClient(t, serveHTTP(t, p)) }},
	}
}

// boundedHTTPClient is a go-sdk client of the HTTP front that takes an
// event of up to mcp.DefaultMaxEventSize (go-sdk v1.8.0's streamable
// client takes a MaxEventSize of 0 for no bound, not its default).
func boundedHTTPClient(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxEventSize: mcp.DefaultMaxEventSize,
		HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bounded", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// fixtureNearEnv gives the fixture the tools of addNear.
const fixtureNearEnv = "PROVLOG_PROXY_FIXTURE_NEAR"

// nearText is a text that makes a result, or an error's message, a few
// bytes under maxEventBytes as go-sdk frames it in a line or an event.
func nearText() string { return strings.Repeat("x", maxEventBytes-300) }

// addNear adds the tools "near", whose result is a few bytes under
// maxEventBytes, and "nearerror", whose error (a JSON-RPC error with no
// data) is.
func addNear(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "near", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: nearText()}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "nearerror", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: nearText()}
	})
}

// TestErrorPastClientBound: a server's error a few bytes under the 16 MiB
// bound, from a stdio server and an HTTP one, grows past it with the
// receipt provlog adds as its data. The client must keep its session and
// be told why; the call and its outcome stay recorded.
func TestErrorPastClientBound(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "near", Version: "1"}, nil)
	addNear(srv)
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	stdio := fixtureServerConfig(t, "s")
	stdio.Env[fixtureNearEnv] = "1"
	ctx := context.Background()

	// Straight from the server, the go-sdk client gets the error.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: down.URL, MaxEventSize: mcp.DefaultMaxEventSize}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "nearerror"}); err == nil || !strings.Contains(err.Error(), "xxxx") {
		t.Fatalf("the call straight to the server: %.100v; want its error", err)
	}

	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "h", URL: down.URL}, stdio}, nil)
	for _, front := range bothFronts(t, p) {
		cs := front.cs()
		for _, tool := range []string{"s__near", "s__nearerror", "h__nearerror"} {
			before := l.size(t)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
			if err == nil {
				t.Logf("%s front, %s: isError %v, %.300s", front.name, tool, res.IsError, textOf(res))
			}
			t.Logf("%s front, %s: %.300v", front.name, tool, err)
			if err == nil || !strings.Contains(err.Error(), "MiB") || strings.Contains(err.Error(), "xxxx") {
				t.Errorf("%s front: %s, whose answer grew past 16 MiB: %.200v; want an error saying why", front.name, tool, err)
			}
			if we := (*jsonrpc.Error)(nil); strings.HasSuffix(tool, "error") && (!errors.As(err, &we) || !strings.Contains(string(we.Data), ReceiptKey)) {
				t.Errorf("%s front: %s's error %.100v: want its receipt as its data", front.name, tool, err)
			}
			if got := l.size(t) - before; got != 2 {
				t.Errorf("%s front: %s left %d entries; want 2 (the call and its call.result)", front.name, tool, got)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatalf("%s front: the session after %s: %v; want it kept", front.name, tool, err)
			}
		}
	}
}
