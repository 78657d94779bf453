package zitadeltest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestExchange: the server's exchange for the agent gives a JWT for the
// user with the agent as act, and one with a subject token it did not
// issue is refused.
func TestExchange(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	agent, err := s.AgentToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Exchange(ctx, agent, User, "http://127.0.0.1:1/mcp")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("the exchanged token is not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ClientID string `json:"client_id"`
		Act      struct{ Sub string }
		Aud      []string
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var sub struct{ Sub string }
	json.Unmarshal(b, &sub)
	if sub.Sub != User || c.ClientID != Client || c.Act.Sub != Agent || len(c.Aud) != 1 || c.Aud[0] != "http://127.0.0.1:1/mcp" {
		t.Errorf("exchanged token claims %s", b)
	}
	if _, err := s.Exchange(ctx, "not-a-token-it-issued", User, "http://127.0.0.1:1/mcp"); err == nil ||
		!strings.Contains(err.Error(), "subject_token is invalid") {
		t.Errorf("exchange with a forged subject token: %v", err)
	}
}
