package proxy

import (
	"context"
	"fmt"
	"net/http"
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
	var gets atomic.Int64
	flooded := make(chan time.Time, 1)
	f, url := newAskFlood(t, "second", func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method != http.MethodGet {
			return false
		}
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
				if _, err := fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"flood-%d\",\"method\":%q,\"params\":%s}\n\n", i, m, params); err != nil {
					return true
				}
			}
			w.(http.Flusher).Flush()
			flooded <- start
		}
		<-r.Context().Done()
		return true
	})
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: url, Timeout: time.Minute}}, nil)
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
		n := f.answered.Load()
		if n == last || n >= asks {
			break
		}
		last = n
	}
	secs := int64(time.Since(start)/time.Second) + 1
	n := f.answered.Load()
	t.Logf("%d of the server's %d standalone requests answered in ~%ds, %d refused for the rate (%.200v)", n, asks, secs, f.refused.Load(), f.refusal.Load())
	if bound := askBound(secs); n > bound {
		t.Errorf("%d of the server's %d requests on its standalone stream were answered, one POST each, in ~%ds; want at most %d", n, asks, secs, bound)
	}
	if r, _ := f.refusal.Load().(string); f.refused.Load() == 0 || !strings.Contains(r, "requests") {
		t.Errorf("no request refused saying why (%d answered)", n)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("a call after the flood: %v %s", err, mustJSON(res))
	}
}
