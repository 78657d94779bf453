package zitadeltest

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

func TestScratchNested(t *testing.T) {
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
	show := func(name, tok string, err error) {
		if err != nil {
			t.Logf("%s: %v", name, err)
			return
		}
		p := strings.Split(tok, ".")
		if len(p) != 3 {
			t.Logf("%s: opaque %d parts", name, len(p))
			return
		}
		b, _ := base64.RawURLEncoding.DecodeString(p[1])
		t.Logf("%s: %s", name, b)
	}
	show("first exchange", tok, nil)
	// 1. the exchanged token as subject_token, impersonating again
	t2, err := s.Exchange(ctx, tok, Agent, "http://127.0.0.1:1/mcp")
	show("exchanged token as subject (impersonate sid1)", t2, err)
	// 2. exchanged token as subject, agent token as actor
	f := url.Values{
		"grant_type": {TokenExchangeGrant}, "subject_token": {tok}, "subject_token_type": {accessTokenType},
		"actor_token": {agent}, "actor_token_type": {accessTokenType},
		"requested_token_type": {accessTokenType}, "scope": {"openid"}, "audience": {"http://127.0.0.1:1/mcp"},
	}
	t3, err := s.token(ctx, Client, s.secret, f)
	show("exchanged as subject, agent as actor", t3, err)
	// 3. agent token as subject, exchanged token (carrying act) as actor
	f.Set("subject_token", agent)
	f.Set("actor_token", tok)
	t4, err := s.token(ctx, Client, s.secret, f)
	show("agent as subject, exchanged (with act) as actor", t4, err)
	f.Set("scope", "openid custom_scope:impersonate:"+User)
	t5, err := s.token(ctx, Client, s.secret, f)
	show("agent as subject, exchanged as actor, impersonate alice", t5, err)
}
