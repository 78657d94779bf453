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

// TestStandaloneRequestsBounded: an HTTP server that floods its
// standalone GET stream (outside any call) with requests of the client —
// pings, sampling, elicitation, roots, each answered with a POST — has at
// most a bounded number of them answered a second: past the bound one is
// answered with an error saying why and the rest of the burst goes
// unanswered, so no POST. The server stays usable: a call after the flood
// is answered. Every one of 20,000 was answered, one POST each.
func TestStandaloneRequestsBounded(t *testing.T) {
	const asks = 20000
	methods := []string{"ping", "sampling/createMessage", "elicitation/create", "roots/list"}
	srv := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var answered, refused, gets atomic.Int64
	var refusal atomic.Value
	flooded := make(chan time.Time, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			if gets.Add(1) == 1 {
				start := time.Now()
				for i := range asks {
					m := methods[i%len(methods)]
					params := `{}`
					switch m {
					case "sampling/createMessage":
						params = `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}`
					case "elicitation/create":
						params = `{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`
					}
					if _, err := fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"sa-%d\",\"method\":%q,\"params\":%s}\n\n", i, m, params); err != nil {
						return
					}
				}
				w.(http.Flusher).Flush()
				flooded <- start
			}
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"id":"sa-`)) {
			answered.Add(1)
			if bytes.Contains(body, []byte(`"error"`)) && bytes.Contains(body, []byte(`second`)) {
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
	cl := newClientLog()
	cl.sample = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Model: "m", Content: &mcp.TextContent{Text: "x"}}, nil
	}
	cs := connectMemory(t, p, cl)
	waitRouted(t, p, "m__x")
	var start time.Time
	select {
	case start = <-flooded:
	case <-time.After(time.Minute):
		t.Fatal("the sidecar never opened the standalone stream")
	}
	// Wait until the answers stop coming (the flood is read).
	for last := int64(-1); ; {
		time.Sleep(time.Second)
		n := answered.Load()
		if n == last || n >= asks {
			break
		}
		last = n
	}
	secs := int64(time.Since(start)/time.Second) + 1
	n := answered.Load()
	t.Logf("%d of the server's %d standalone requests answered in ~%ds, %d refused for the rate (%.200v)", n, asks, secs, refused.Load(), refusal.Load())
	if bound := askBound(secs); n > bound {
		t.Errorf("%d of the server's %d requests on its standalone stream were answered, one POST each, in ~%ds; want at most %d", n, asks, secs, bound)
	}
	if r, _ := refusal.Load().(string); refused.Load() == 0 || !strings.Contains(r, "requests") {
		t.Errorf("no request refused saying why (%d answered)", n)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("a call after the flood: %v %s", err, mustJSON(res))
	}
}
