package proxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedactedValueHexScrubbed: a server that quotes a redacted value
// hex-encoded (a digest tool's input shown back, a key as hex), in lower
// or upper case, with bytes before it or not, in a result's text, its
// structured content and an error's message, does not get it into the
// call's entries, its kept result or the sidecar's log.
func TestRedactedValueHexScrubbed(t *testing.T) {
	encodings := func(v string) []string {
		h := hex.EncodeToString([]byte(v))
		return []string{h, strings.ToUpper(hex.EncodeToString([]byte("\x01" + v)))}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hexer", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "login", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Token string `json:"token"`
			Fail  bool   `json:"fail"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		enc := encodings(a.Token)
		if a.Fail {
			return nil, &jsonrpc.Error{Code: -32001, Message: "refused key 0x" + strings.Join(enc, " 0x")}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key: " + enc[0]}, &mcp.TextContent{Text: enc[1]}}, StructuredContent: map[string]any{"hex": enc}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{{ID: "hx", URL: down.URL, Redact: []string{"token"}, Retain: RetainFull}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	var texts []string
	for _, v := range []string{"Sq-Hex-Secret-93x", "S3CRET-Caf\u00e9-\u03c3\u0394-k2"} {
		enc := encodings(v)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hx__login", Arguments: map[string]any{"token": v}})
		if err != nil || res.IsError {
			t.Fatalf("login: %v %s", err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hx__login", Arguments: map[string]any{"token": v, "fail": true}}); err == nil {
			t.Fatal("failing login succeeded")
		}
		// The value's own bytes in hex, in either case.
		texts = append(texts, enc[0], strings.ToUpper(enc[0]))
	}
	writtenNowhere(t, l, &logs, texts)
}
