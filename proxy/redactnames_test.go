package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactedMemberNamesScrubbed: a redacted argument whose value is an
// object is redacted whole, the names of its members too: a server that
// echoes the arguments it got (in a result kept whole, in a JSON-RPC
// error's text) does not get a name inside it into the call's entries,
// the kept result or the sidecar's log. Only the members' values were
// scrubbed; their names were kept as the server wrote them.
func TestRedactedMemberNamesScrubbed(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "names", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "store", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a map[string]any
		json.Unmarshal(req.Params.Arguments, &a)
		b, _ := json.Marshal(a) // as it read them
		if a["fail"] == true {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused " + string(b)}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored " + string(b)}}, StructuredContent: a}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "nm", URL: down.URL, Redact: []string{"credentials"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	names := []string{"S3CRET-name-k1", "S3CRET-name-k2", "S3CRET-name-k3"}
	creds := map[string]any{names[0]: "value-of-k1", "list": []any{map[string]any{names[1]: true}}}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nm__store", Arguments: map[string]any{"credentials": creds}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), names[0]) {
		t.Fatalf("store: %v %s", err, mustJSON(res))
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nm__store", Arguments: map[string]any{"credentials": map[string]any{names[2]: nil}, "fail": true}})
	if err == nil || !strings.Contains(err.Error(), names[2]) {
		t.Fatalf("failing store: %v", err)
	}
	writtenNowhere(t, l, &logs, append(names, "value-of-k1"))
}
