package proxy

import (
	"net/http"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestSessionEndCancelsResumableCall: a 2025-11-25 client's fast-path
// call outlives its POST (the client may resume its stream), so what ends
// it early is its session's end: after a DELETE the downstream's handler
// sees the call cancelled, and the call.result records that it failed.
func TestSessionEndCancelsResumableCall(t *testing.T) {
	down := newStreamServer(t)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.url}}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))

	at := l.size(t)
	body, first := postCall(t, front, cs.ID(), "gate")
	if first["id"] == "" {
		t.Fatalf("first event %q, want a priming event", first)
	}
	body.Close() // the call goes on without its POST
	l.waitSize(t, at+1)
	if got := l.size(t); got != at+1 {
		t.Fatalf("before the session ends: the log grew by %d entries, want the call's alone", got-at)
	}

	req, _ := http.NewRequest(http.MethodDelete, front, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// The gate is never opened: only the cancellation ends the call.
	l.waitSize(t, at+2)
	e, err := log.ParseEntry(l.entry(t, at+1))
	if err != nil || e.Kind != log.KindCallResult {
		t.Fatalf("entry %d is %v (%v), want the call's call.result", at+1, e, err)
	}
	if e.Fields["error"] == nil || e.Fields["error"] == "" {
		t.Errorf("the call.result of a call its session's end cancelled: %v, want an error", e.Fields)
	}
}
