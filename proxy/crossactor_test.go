package proxy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParkAsksStayWithTheirActor: a stdio server spoken to in 2025-11-25
// does not say which call its request is for, and each 2026-07-28 client's
// call is a client of its own: with alice's call parked on the server, a
// request the server makes while bob's call is in progress too cannot be
// told to be either's, and reaches neither (the server gets an error and
// bob's call ends with what the server made of it). Once bob's call is
// over, the server's next request, made for alice's call, comes to alice's
// retry as her call's next round.
//
// Before, sessionless calls were taken for one session's calls and a
// server's request went to the latest: the request made for alice's call
// went to bob's (live: bob's answer finished alice's call, and the log
// said it had gone to bob's), and alice's retry waited for a round that
// never came.
func TestParkAsksStayWithTheirActor(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	dir := t.TempDir()
	aliceArgs := map[string]any{"path": filepath.Join(dir, "alice")}
	bobArgs := map[string]any{"path": filepath.Join(dir, "bob")}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	aliceFirst := parkedRound(t, alice, aliceArgs)
	bobRes, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: bobArgs})
	switch {
	case err != nil:
		t.Fatalf("bob's call: %v", err)
	case bobRes.NeedsInput() || !bobRes.IsError || !strings.Contains(textOf(bobRes), "cannot tell which one"):
		t.Errorf("bob's call while alice's is parked: %s, want the server's error for a request that cannot be told to be his", mustJSON(bobRes))
	}
	if got := fileLines(t, filepath.Join(dir, "bob")); got != "elicitation failed" {
		t.Errorf("the server saw for bob's call: %q", got)
	}
	var id string
	for k := range aliceFirst.InputRequests {
		id = k
	}
	aliceSecond, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: aliceArgs, RequestState: aliceFirst.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}}})
	switch {
	case err != nil:
		t.Fatalf("alice's retry: %v", err)
	case !strings.Contains(mustJSON(aliceSecond.InputRequests), "Greet Ada"):
		t.Errorf("alice's retry: %s, want her call's next round asking to greet Ada", mustJSON(aliceSecond))
	}
}
