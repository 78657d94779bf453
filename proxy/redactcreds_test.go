package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addCreds adds the tools "whoami", which prints the API_TOKEN its
// environment holds on stderr and answers with it, and "whoami_fail",
// which refuses with it in the JSON-RPC error's text.
func addCreds(s *mcp.Server) {
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "whoami", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "whoami: API_TOKEN="+os.Getenv("API_TOKEN"))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + os.Getenv("API_TOKEN")}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "whoami_fail", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "unknown token " + os.Getenv("API_TOKEN")}
	})
}

// TestConfiguredCredentialsScrubbed: the credentials an operator gives a
// downstream in its config (an Authorization header, a key in its URL's
// query, an API token in a stdio server's environment) are not written
// when the server echoes them (a gateway's "invalid key ..." error, a
// whoami tool, a start-up line on stderr): not in a call.result's error
// text, a kept result or the sidecar's log. The client gets the server's
// answer as it was sent.
func TestConfiguredCredentialsScrubbed(t *testing.T) {
	const bearer, query, env = "S3CRET-hdr-5d1e90", "S3CRET-query-77ab2c", "S3CRET-env-c04f13"
	srv := mcp.NewServer(&mcp.Implementation{Name: "gateway", Version: "1"}, nil)
	echo := func(req *mcp.CallToolRequest) string {
		return "auth " + req.Extra.Header.Get("Authorization") + " key " + req.Extra.Header.Get("X-Seen-Key")
	}
	srv.AddTool(&mcp.Tool{Name: "whoami", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + echo(req)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "whoami_fail", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "invalid credentials: " + echo(req)}
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Seen-Key", r.URL.Query().Get("key")) // as a gateway that quotes the key it was given
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	var logs lockedBuf
	p := startProxy(t, l, []ServerConfig{
		{ID: "gw", URL: down.URL + "/mcp?key=" + query, Headers: map[string]string{"Authorization": "Bearer " + bearer}, Retain: RetainFull},
		{ID: "env", Command: fixtureServer(t), Env: map[string]string{fixtureEnv: "creds", "API_TOKEN": env}, Retain: RetainFull},
	}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	for server, want := range map[string][]string{"gw": {bearer, query}, "env": {env}} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: server + "__whoami", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), want[0]) {
			t.Fatalf("%s whoami: %v %s", server, err, mustJSON(res))
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: server + "__whoami_fail", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), want[len(want)-1]) {
			t.Fatalf("%s whoami_fail: %v", server, err)
		}
	}
	// The fixture's line on stderr reaches the log after its answer.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), "whoami: API_TOKEN="); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fixture's stderr line was never logged: %s", logs.String())
		}
	}
	writtenNowhere(t, l, &logs, []string{bearer, query, env})
}
