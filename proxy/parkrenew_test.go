package proxy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParkTimeoutNotRenewedByRefusedRetry: a parked round ends
// parking.timeout after it was parked, however many retries were refused
// meanwhile. A retry refused after it took the round (its inputResponses
// nested deeper than the log records) put the round back with a wait of
// its own, so a client sending one every 100 ms kept a round of a 300 ms
// timeout parked, and the server's request waiting, for as long as it
// went on (till the server's own timeout).
func TestParkTimeoutNotRenewedByRefusedRetry(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, func(o *Options) { o.ParkTimeout = 300 * time.Millisecond })
	cs := handClient(t, serveTokens(t, p, map[string]string{"tok": "alice"}), "tok")
	seen := filepath.Join(t.TempDir(), "seen")
	args := map[string]any{"path": seen}
	first := parkedRound(t, cs, args)
	var id string
	for k := range first.InputRequests {
		id = k
	}
	var deep any = "x"
	for range 200 {
		deep = map[string]any{"a": deep}
	}
	answers := mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": deep}}}
	refused := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: args, InputResponses: answers, RequestState: first.RequestState})
		if err != nil && strings.Contains(err.Error(), "unknown, expired or used") {
			break // the round ended
		}
		if err == nil || !strings.Contains(err.Error(), "its inputResponses cannot be recorded") {
			t.Fatalf("a retry with answers nested 200 deep: %v", err)
		}
		refused++
		if time.Now().After(deadline) {
			w, _ := p.parked.size()
			t.Fatalf("after %d refused retries over 10s, %d round(s) of a 300ms parking.timeout still parked", refused, w)
		}
	}
	calls, results := legsOf(t, l, "ask_twice", "hand-client")
	if len(calls) != 2 || results[1] == 0 || calls[1].InputResponsesSHA256 != "" {
		t.Errorf("after the timeout: %d legs, results at %v; want the first and its closing leg", len(calls), results)
	}
	if got := fileLines(t, seen); got != "elicitation failed" {
		t.Errorf("the server got %q", got)
	}
}
