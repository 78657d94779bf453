package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPTrickleTimesOut: an HTTP server that answers a call with an
// event stream and then trickles (an event's bytes one at a time, never
// ending it; or comments, keep-alives, without end) has the call ended at
// the server's call timeout, recorded as failed with that outcome, and
// the request's connection closed (the server sees its request end), on
// the proxy's own path and go-sdk's (a progress token).
func TestHTTPTrickleTimesOut(t *testing.T) {
	for _, tc := range []struct{ name, head, drip string }{
		{"event", `data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, "x"},
		{"comments", ": open\n\n", ": keep-alive\n\n"},
	} {
		for _, sdk := range []bool{false, true} {
			freed := make(chan struct{}, 1)
			down := oddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
				id := callRequestID(t, r)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(strings.Replace(tc.head, "%s", id, 1)))
				w.(http.Flusher).Flush()
				for {
					select {
					case <-r.Context().Done():
						freed <- struct{}{}
						return
					case <-time.After(200 * time.Millisecond):
					}
					w.Write([]byte(tc.drip))
					w.(http.Flusher).Flush()
				}
			})
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{{ID: "m", URL: down, Timeout: 2 * time.Second}}, nil)
			cs := connectMemory(t, p, nil)
			waitRouted(t, p, "m__x")
			before := l.size(t)
			params := &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}}
			if sdk {
				params.SetProgressToken("p")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := cs.CallTool(ctx, params)
			ended := ctx.Err() == nil
			cancel()
			if !ended {
				t.Fatalf("%s, sdk %v: the call ran on past its timeout of 2 s, 30 s, until the client gave up", tc.name, sdk)
			}
			if err == nil && !res.IsError {
				t.Errorf("%s, sdk %v: a trickle answered the call: %s", tc.name, sdk, mustJSON(res))
			}
			e, _ := l.callAt(t, before)
			if msg, _ := e.Fields["error"].(string); e.Fields["is_error"] != true || !strings.Contains(msg, "did not answer") {
				t.Errorf("%s, sdk %v: the call's entry: %v", tc.name, sdk, e.Fields)
			}
			select {
			case <-freed:
			case <-time.After(20 * time.Second):
				t.Errorf("%s, sdk %v: the request's connection was not closed", tc.name, sdk)
			}
		}
	}
}
