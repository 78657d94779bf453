package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/provlog/provlog/tools/zitadeltest"
)

// TestOAuthTokenExchange drives provlog with an RFC 8693 token-exchange
// token from a real authorization server: the zitadel/oidc library's
// example OpenID Provider (Hydra has no such grant; see package
// zitadeltest). The agent trades its own token for one to act for
// alice; the server's token has sub alice and act {sub: the agent}. That
// token goes through a downstream tool and a task claim, and every entry
// it wrote names alice as the actor, with the server's act chain, the
// exchanging client and the token's hash, never the token. The token
// for another audience, and the agent's own opaque token (no
// introspection is configured), are refused with nothing written.
func TestOAuthTokenExchange(t *testing.T) {
	op := zitadeltest.Start(t)
	s := startAuthSidecar(t, nil, func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      discovery_url: %s
      actor_prefix: "zitadel:"
  clock_skew: 1s
`, s.resource, op.Issuer, op.DiscoveryURL)
	})
	ctx := context.Background()
	agentTok := mint(t)(op.AgentToken(ctx))
	tok := mint(t)(op.Exchange(ctx, agentTok, zitadeltest.User, s.resource))
	c := jwtClaims(t, tok)
	if c["sub"] != zitadeltest.User || c["client_id"] != zitadeltest.Client {
		t.Fatalf("exchanged token: sub %v, client_id %v; want %s, %s", c["sub"], c["client_id"], zitadeltest.User, zitadeltest.Client)
	}
	act := map[string]any{"sub": zitadeltest.Agent}
	if got, want := mustJSON(t, asMap(c["act"])), mustJSON(t, act); string(got) != string(want) {
		t.Fatalf("exchanged token: act %s; want %s", got, want)
	}
	other := mint(t)(op.Exchange(ctx, agentTok, zitadeltest.User, otherResource))

	task := s.work(t, tok, "work for alice, by token exchange")
	s.refused(t, map[string]string{"wrong audience": other, "opaque, not introspected": agentTok})

	s.stop()
	entries := readAll(t, s.data)
	checkAuthEntries(t, entries, tok, "zitadel:"+zitadeltest.User, task, act)
	checkTokenAbsent(t, s, tok, true)
	checkTokenAbsent(t, s, other, false)
	if out, code := runCmd(t, "audit", "--data", s.data); code != 0 {
		t.Fatalf("audit: %s", out)
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
