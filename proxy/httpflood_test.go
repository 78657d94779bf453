package proxy

import (
	"context"
	"strings"
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
	f, url := newAskFlood(t, "", pingsOnCall(t, pings))
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: url, Timeout: time.Minute}}, nil)
	cs := connectMemory(t, p, nil)
	waitRouted(t, p, "m__x")
	before, start := l.size(t), time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
	secs := int64(time.Since(start)/time.Second) + 1
	n := f.answered.Load()
	t.Logf("%d of the server's %d requests answered in ~%ds, %d with an error; the call: %v %s", n, pings, secs, f.refused.Load(), err, mustJSON(res))
	if bound := askBound(secs); n > bound {
		t.Fatalf("%d of the server's %d requests during one call were answered, one POST each, in ~%ds; want at most %d", n, pings, secs, bound)
	}
	if r, _ := f.refusal.Load().(string); f.refused.Load() > secs || !strings.Contains(r, "requests") {
		t.Errorf("%d requests refused in ~%ds (%.300s), want at most one a second, saying why", f.refused.Load(), secs, r)
	}
	if err != nil || res.IsError || textOf(res) != "ok" {
		t.Errorf("the call: %v %s", err, mustJSON(res))
	}
	if e, _ := l.callAt(t, before); e.Fields["is_error"] == true {
		t.Errorf("the call's entry: %v", e.Fields)
	}
}
