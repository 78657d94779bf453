package zitadeltest

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/oauthtest"
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
	c := oauthtest.Claims(t, tok)
	act, _ := c["act"].(map[string]any)
	aud, _ := c["aud"].([]any)
	if c["sub"] != User || c["client_id"] != Client || act["sub"] != Agent || len(aud) != 1 || aud[0] != "http://127.0.0.1:1/mcp" {
		t.Errorf("exchanged token claims %v", c)
	}
	if _, err := s.Exchange(ctx, "not-a-token-it-issued", User, "http://127.0.0.1:1/mcp"); err == nil ||
		!strings.Contains(err.Error(), "subject_token is invalid") {
		t.Errorf("exchange with a forged subject token: %v", err)
	}
}

// TestExchangeActIsOneLevel pins why the act chain this server gives is
// one level deep: the zitadel/oidc library (v3.52.0) writes no nested
// act. Its op package sets a token's actor only from a request that
// implements op.TokenActorRequest (pkg/op/token.go, CreateJWT), and no
// type in the module does, the op package's own tokenExchangeRequest
// included; so act comes only from the storage's private claims
// (GetPrivateClaimsFromTokenExchangeRequest), and the example storage's
// getTokenExchangeClaims (example/server/storage/storage.go) writes
// {sub: the subject token's subject} for an impersonation scope without
// an actor_token, never copying the act of the token it was given, and
// nothing at all with an actor_token (its delegation branch is commented
// out). So an exchanged token (sub alice, act sid1) is no subject_token
// for another exchange by a party that is not an admin, and an
// actor_token carrying act gives a token with no act. When a version of
// the library nests act, this fails: then give TestOAuthTokenExchange
// (cmd/provlog) its nested chain from this server.
func TestExchangeActIsOneLevel(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	const aud = "http://127.0.0.1:1/mcp"
	agent, err := s.AgentToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Exchange(ctx, agent, User, aud)
	if err != nil {
		t.Fatal(err)
	}
	if act := oauthtest.Claims(t, tok)["act"]; act == nil {
		t.Fatalf("the first exchange gives no act: %v", oauthtest.Claims(t, tok))
	}
	if _, err := s.Exchange(ctx, tok, Agent, aud); err == nil || !strings.Contains(err.Error(), "impersonation permission") {
		t.Errorf("exchanging the exchanged token again: %v; want the example's refusal", err)
	}
	f := url.Values{
		"grant_type": {TokenExchangeGrant}, "subject_token": {agent}, "subject_token_type": {accessTokenType},
		"actor_token": {tok}, "actor_token_type": {accessTokenType}, "requested_token_type": {accessTokenType},
		"scope": {"openid custom_scope:impersonate:" + User}, "audience": {aud},
	}
	for _, swap := range []bool{false, true} {
		if swap { // the exchanged token as subject, the agent's as actor
			f.Set("subject_token", tok)
			f.Set("actor_token", agent)
			f.Set("scope", "openid")
		}
		got, err := s.token(ctx, Client, s.secret, f)
		if err != nil {
			t.Fatal(err)
		}
		if c := oauthtest.Claims(t, got); c["act"] != nil {
			t.Errorf("an exchange with an actor token gives act %v: the library nests act now (see the doc comment)", c["act"])
		}
	}
}
