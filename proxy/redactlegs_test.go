package proxy

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParkedRetryAfterAnotherCallsValue: a parked call's retry is taken
// when, between its legs, another call made the server remember a
// redacted value that its arguments hold (a note naming a database whose
// name another client sent as a token). Its arguments were recorded
// scrubbed of the server's values of the moment, and the retry's, now
// scrubbed of that value, were not the first leg's: the retry was
// refused as if it were another call's.
func TestParkedRetryAfterAnotherCallsValue(t *testing.T) {
	const value = "prod-db-7781"
	l := newTestLog(t)
	cfg := askingFixture(t, "fx")
	cfg.Redact = []string{"token"}
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	args := map[string]any{"path": filepath.Join(t.TempDir(), "seen"), "note": "on " + value}
	ctx := context.Background()
	first := parkedRound(t, alice, args)
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{"token": value}}); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
	var id string
	for k := range first.InputRequests {
		id = k
	}
	answers := mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}}
	if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: args, InputResponses: answers, RequestState: first.RequestState}); err != nil {
		t.Fatalf("alice's retry: %v", err)
	}
}

// TestParkedReadRetryAfterAnotherCallsValue: TestParkedRetryAfterAnotherCallsValue
// for a parked prompts/get, whose arguments are recorded as a call's.
func TestParkedReadRetryAfterAnotherCallsValue(t *testing.T) {
	const value = "prod-db-7781"
	l := newTestLog(t)
	cfg := askingFixture(t, "fx")
	cfg.Redact = []string{"token"}
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	args := map[string]string{"path": filepath.Join(t.TempDir(), "seen"), "note": "on " + value}
	ctx := context.Background()
	first, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first leg: %v %s", err, mustJSON(first))
	}
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{"token": value}}); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
	answers := mcp.InputResponseMap{}
	for id := range first.InputRequests {
		answers[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}
	}
	if _, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args, InputResponses: answers, RequestState: first.RequestState}); err != nil {
		t.Fatalf("alice's retry: %v", err)
	}
}
