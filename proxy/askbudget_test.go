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

// TestStdioStandaloneRequestsBounded: a stdio server that sends ping
// after ping outside any call (the raw server's tool "pings": 20,000 at
// once, once it answered the call) has them answered within its budget of
// requests, as an HTTP server's standalone stream has
// (TestStandaloneRequestsBounded): past it one a second is answered with
// an error saying why and the rest go unanswered. Each ping, answered at
// once, left the stdio bound (requests awaiting their answers) untouched:
// all 20,000 were answered, a line each, as fast as they came.
func TestStdioStandaloneRequestsBounded(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{rawServerConfig(t, "raw")}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "raw__pinged")
	ctx := context.Background()
	start := time.Now()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__pings"}); err != nil || res.IsError {
		t.Fatalf("the call that starts the pings: %v %s", err, mustJSON(res))
	}
	// Ask the server until the answers stop coming (the pings are read).
	var said string
	var n, refused int
	for last := -1; ; last = n {
		time.Sleep(time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "raw__pinged"})
		if err != nil {
			t.Fatal(err)
		}
		said = textOf(res)
		if _, err := fmt.Sscanf(said, "answered %d refused %d", &n, &refused); err != nil {
			t.Fatalf("the server said %q: %v", said, err)
		}
		if n == last || n >= rawPingsSent {
			break
		}
	}
	secs := int(time.Since(start)/time.Second) + 1
	t.Logf("%d of the server's %d pings answered in ~%ds: %s", n, rawPingsSent, secs, said)
	if bound := askBound(int64(secs)); int64(n) > bound {
		t.Errorf("%d of a stdio server's %d pings outside a call were answered, a line each, in ~%ds; want at most %d", n, rawPingsSent, secs, bound)
	}
	if refused == 0 || !strings.Contains(said, "requests") {
		t.Errorf("no ping refused saying why: %q", said)
	}
}

// TestHTTPCallsRequestsBounded: an HTTP server that sends 1,000 pings on
// each of 20 calls' event streams (each call under any bound of one
// call's) has them answered within its budget of requests, one for all
// its calls: past it one a second is answered with an error saying why
// and the rest go unanswered; each call is still answered. All 20,000
// were answered, one POST each.
func TestHTTPCallsRequestsBounded(t *testing.T) {
	const calls, pings = 20, 1000
	f, url := newAskFlood(t, "", pingsOnCall(t, pings))
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: url, Timeout: time.Minute}}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "m__x")
	start := time.Now()
	for i := range calls {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
		if err != nil || res.IsError || textOf(res) != "ok" {
			t.Fatalf("call %d: %v %s", i, err, mustJSON(res))
		}
	}
	secs := int64(time.Since(start)/time.Second) + 1
	n := f.answered.Load()
	t.Logf("%d of the server's %d requests over %d calls answered in ~%ds, %d with an error (%.300v)", n, calls*pings, calls, secs, f.refused.Load(), f.refusal.Load())
	if bound := askBound(secs); n > bound {
		t.Errorf("%d of the server's %d requests over %d calls were answered, one POST each, in ~%ds; want at most %d", n, calls*pings, calls, secs, bound)
	}
	if r, _ := f.refusal.Load().(string); f.refused.Load() == 0 || !strings.Contains(r, "requests") {
		t.Errorf("no request refused saying why (%d answered)", n)
	}
}

// An askFlood is an HTTP MCP server whose tool "x" answers "ok", and which
// floods the proxy with requests of the client (flood, in
// newAskFlood): it counts the answers to them (ids that begin
// "flood-"), each taken with 202, and the refusals among them, error
// answers that hold why.
type askFlood struct {
	why               []byte
	answered, refused atomic.Int64
	refusal           atomic.Value // the last refusal's body
}

// newAskFlood starts an askFlood whose flood, given each request (its
// body read, and put back) before anything else, reports whether it
// handled it; it returns it and its URL.
func newAskFlood(t *testing.T, why string, flood func(w http.ResponseWriter, r *http.Request, body []byte) bool) (*askFlood, string) {
	f := &askFlood{why: []byte(why)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case flood(w, r, body):
		case bytes.Contains(body, []byte(`"id":"flood-`)):
			f.answered.Add(1)
			if bytes.Contains(body, []byte(`"error"`)) && bytes.Contains(body, f.why) {
				f.refused.Add(1)
				f.refusal.Store(string(body))
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			sdk.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(down.Close)
	return f, down.URL
}

// pingsOnCall is an askFlood's flood that answers each call with pings
// pings on its event stream, then the call's answer, "ok".
func pingsOnCall(t *testing.T, pings int) func(http.ResponseWriter, *http.Request, []byte) bool {
	var calls atomic.Int64
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			return false
		}
		id, c := callRequestID(t, r), calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range pings {
			if r.Context().Err() != nil {
				return true
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"flood-%d-%d\",\"method\":\"ping\"}\n\n", c, i)
		}
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n", id)
		return true
	}
}

// askBound is how many of a server's requests a test lets be answered in
// secs seconds (rounded up): its budget's burst and twice its rate.
func askBound(secs int64) int64 {
	return maxServerRequestsBurst + 2*maxServerRequestsPerSecond*secs
}
