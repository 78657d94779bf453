package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/tools/hydratest"
	"github.com/provlog/provlog/tools/oauthtest"
	"github.com/provlog/provlog/tools/zitadeltest"
)

// TestOAuthTokenExchange drives one provlog trusting two real
// authorization servers: ORY Hydra, for a client-credentials token (a bot
// acting as itself), and the zitadel/oidc library's example OpenID
// Provider, for an RFC 8693 token-exchange token (Hydra has no such
// grant; see package zitadeltest): the agent trades its own token for
// one to act for alice, and the server's token has sub alice and act
// {sub: the agent}. Each goes through a downstream tool and a task claim,
// and every entry it wrote names its actor, with the server's act chain,
// the client and the token's hash, never the token. The two issuers'
// alices are two actors: Hydra's cannot claim the task zitadel's owns.
// The exchange's token for another audience, and the agent's own opaque
// token (no introspection is configured), are refused with nothing
// written.
func TestOAuthTokenExchange(t *testing.T) {
	op := zitadeltest.Start(t)
	s := startAuthSidecar(t, hydratest.Start(t, hydratest.Options{}), func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      discovery_url: %s
      actor_prefix: "hydra:"
    - issuer: %s
      discovery_url: %s
      actor_prefix: "zitadel:"
  clock_skew: 1s
`, s.resource, s.hydra.Issuer, s.hydra.DiscoveryURL, op.Issuer, op.DiscoveryURL)
	})
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	botTok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	hydraAlice := hy.TrustDelegator(t, "alice", allScopes...)
	hydraAgent := hy.CreateClient(t, hydratest.Client{ID: "review-agent", Scopes: allScopes, Audience: []string{s.resource},
		GrantTypes: []string{hydratest.JWTBearerGrant}})
	hydraAliceTok := mint(t)(hy.JWTBearer(ctx, hydraAgent, hydraAlice.Assertion(t), s.resource, allScopes...))

	agentTok := mint(t)(op.AgentToken(ctx))
	tok := mint(t)(op.Exchange(ctx, agentTok, zitadeltest.User, s.resource))
	c := oauthtest.Claims(t, tok)
	if c["sub"] != zitadeltest.User || c["client_id"] != zitadeltest.Client {
		t.Fatalf("exchanged token: sub %v, client_id %v; want %s, %s", c["sub"], c["client_id"], zitadeltest.User, zitadeltest.Client)
	}
	act := map[string]any{"sub": zitadeltest.Agent}
	if got, want := mustJSON(t, asMap(c["act"])), mustJSON(t, act); string(got) != string(want) {
		t.Fatalf("exchanged token: act %s; want %s", got, want)
	}
	other := mint(t)(op.Exchange(ctx, agentTok, zitadeltest.User, otherResource))

	botTask := s.work(t, botTok, "bot's own work")
	task := s.work(t, tok, "work for alice, by token exchange")
	s.notOwner(t, hydraAliceTok, task, "zitadel:"+zitadeltest.User)
	s.refused(t, map[string]string{"wrong audience": other, "opaque, not introspected": agentTok})

	s.stop()
	entries := readAll(t, s.data)
	checkAuthEntries(t, entries, botTok, "hydra:client:ci-bot", botTask, nil)
	checkAuthEntries(t, entries, tok, "zitadel:"+zitadeltest.User, task, act)
	checkTokenAbsent(t, s, botTok, true)
	checkTokenAbsent(t, s, tok, true)
	checkTokenAbsent(t, s, other, false)
	if out, code := runCmd(t, "audit", "--data", s.data); code != 0 {
		t.Fatalf("audit: %s", out)
	}
}

// notOwner has tok's identity try to report task done: refused as
// owner's, not its own, with nothing written.
func (s *oauthSidecar) notOwner(t *testing.T, tok, task, owner string) {
	t.Helper()
	before := s.size(t)
	cs := connectHTTP(t, s.base, tok)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "report_completion",
		Arguments: map[string]any{"task_id": task, "provenance": "reviewed", "summary": "not mine"}})
	cs.Close()
	if err != nil || !res.IsError || !strings.Contains(contentText(res), "rule not_owner") || !strings.Contains(contentText(res), "owned by "+owner) {
		t.Errorf("report_completion on %s's task: %v, %+v; want a not_owner tool error", owner, err, res)
	}
	if after := s.size(t); after != before {
		t.Errorf("a refused report_completion wrote %d entries", after-before)
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
