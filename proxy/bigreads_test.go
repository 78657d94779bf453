package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestBigReads: a prompts/get whose arguments are too large for its entry
// is recorded with the arguments in a blob (args_sha256), as a call's
// are, and a resources/read whose entry cannot fit at all (a URI of
// 70,000 bytes) is refused before it reaches the server, saying why.
// Both reached the server and then were withheld, with nothing in the
// log.
func TestBigReads(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	var reached atomic.Int32
	srv.AddPrompt(&mcp.Prompt{Name: "review", Arguments: []*mcp.PromptArgument{{Name: "code"}, {Name: "api_key"}}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			reached.Add(1)
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "review this"}}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "f", URITemplate: "file:///{path}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			reached.Add(1)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "b", URL: down.URL, Redact: []string{"api_key"}}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	code := strings.Repeat("x", 70000)
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__review", Arguments: map[string]string{"code": code, "api_key": "sk-secret-1234"}})
	if err != nil {
		t.Fatalf("a prompt with 70,000 bytes of arguments: %v", err)
	}
	e := l.readReceipt(t, res.Meta, log.KindPromptGet)
	if e.Args != nil || e.ArgsSHA256 == "" {
		t.Fatalf("prompt.get entry: args %.60s, args_sha256 %q: want the arguments in a blob", e.Args, e.ArgsSHA256)
	}
	blob, err := l.blobs.Get(e.ArgsSHA256)
	if err != nil {
		t.Fatalf("the arguments' blob: %v", err)
	}
	var args map[string]string
	if err := json.Unmarshal(blob, &args); err != nil || args["code"] != code || args["api_key"] != "[redacted]" {
		t.Errorf("the blob holds %.80s: want the arguments, redacted", blob)
	}

	size, before := l.size(t), reached.Load()
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "b+file:///" + strings.Repeat("y", 70000)})
	if err == nil || !strings.Contains(err.Error(), "not made") || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a read with a URI of 70,000 bytes: %v", err)
	}
	if reached.Load() != before || l.size(t) != size {
		t.Errorf("the read the log cannot record reached the server (%d times) or the log (%d entries)", reached.Load()-before, l.size(t)-size)
	}
}
