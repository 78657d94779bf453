package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPServerRequestsBounded: an HTTP server that sends request after
// request on a call's event stream (here 20,000 pings; a server's 200,000
// sampling requests cost ~63% of a core, one POST each) has at most a
// bounded number of them answered (its budget, askbudget.go): past it one
// a second is answered with an error saying why and the rest go
// unanswered, no POST; the call's answer, after them, is taken. Every one
// was answered, one POST each.
func TestHTTPServerRequestsBounded(t *testing.T) {
	const pings = 20000
	srv := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var answered, refused atomic.Int64
	var refusal atomic.Value
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte(`"tools/call"`)):
			id := callRequestID(t, r)
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range pings {
				if r.Context().Err() != nil {
					return
				}
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"flood-%d\",\"method\":\"ping\"}\n\n", i)
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n", id)
			return
		case bytes.Contains(body, []byte(`"id":"flood-`)):
			answered.Add(1)
			if bytes.Contains(body, []byte(`"error"`)) {
				refused.Add(1)
				refusal.Store(string(body))
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: down.URL, Timeout: time.Minute}}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "m__x")
	before, start := l.size(t), time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
	secs := int64(time.Since(start)/time.Second) + 1
	n := answered.Load()
	t.Logf("%d of the server's %d requests answered in ~%ds, %d with an error; the call: %v %s", n, pings, secs, refused.Load(), err, mustJSON(res))
	if bound := askBound(secs); n > bound {
		t.Fatalf("%d of the server's %d requests during one call were answered, one POST each, in ~%ds; want at most %d", n, pings, secs, bound)
	}
	if r, _ := refusal.Load().(string); refused.Load() > secs || !strings.Contains(r, "requests") {
		t.Errorf("%d requests refused in ~%ds (%.300s), want at most one a second, saying why", refused.Load(), secs, r)
	}
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("the call: %v %s", err, mustJSON(res))
	}
	if e, _ := l.callAt(t, before); e.Fields["is_error"] == true {
		t.Errorf("the call's entry: %v", e.Fields)
	}
}
