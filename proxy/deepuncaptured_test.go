package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPDeepAnswerUncaptured: an HTTP server's answer nested deeper
// than go-sdk reads, to a request the proxy sends through go-sdk without
// capturing its result (completion/complete), fails that request alone:
// go-sdk reads an error answer in its place (deepStandIn), its connection
// to the server goes on, and a call after it is made on the same session.
// go-sdk ended the connection on such an answer (the tees sat only under
// captured requests): the proxy restarted the server's connection, and
// the call after it failed ("the server no longer knows the session").
func TestHTTPDeepAnswerUncaptured(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "deep", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{}, nil
		},
	})
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "made"}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "a"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var inits, deep atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := readIDMethod(r)
		switch m.Method {
		case "initialize":
			inits.Add(1)
		case "completion/complete":
			deep.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"completion":{"values":[]},"d":`+nested(1001)+"}}\n\n")
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)

	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "h", URL: down.URL}}, nil)
	waitRouted(t, p, "h__x")
	pc := newPipeClient(t, p)
	pc.send(`{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"h__p"},"argument":{"name":"a","value":""}}}`)
	got := pc.read()
	if deep.Load() != 1 || !bytes.Contains(got, []byte(`"error"`)) || !strings.Contains(string(got), deepStandIn) {
		t.Errorf("the completion answered %d times nested too deep: the client got %.300s, want an error saying so", deep.Load(), got)
	}
	pc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"h__x","arguments":{}}}`)
	if got := pc.read(); !bytes.Contains(got, []byte(`"made"`)) {
		t.Errorf("the call after it: %.300s", got)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the proxy connected to the server %d times, want once: the deep answer ended its connection", n)
	}
}
