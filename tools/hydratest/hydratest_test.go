package hydratest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const resource = "http://127.0.0.1:1/mcp"

// claims are the access token claims the tests look at.
type claims struct {
	jwt.Claims
	ClientID string         `json:"client_id"`
	Scope    string         `json:"scope"`
	Scp      []string       `json:"scp"`
	Act      map[string]any `json:"act"`
	Ext      map[string]any `json:"ext"`
}

// verify checks token against the key set Hydra's discovery document
// names, as a resource server would, and returns its claims and kid.
func verify(t *testing.T, s *Server, token string) (claims, string) {
	t.Helper()
	return verifyAt(t, s, token, false)
}

// verifyAt is verify, checking the claims' times at the token's issue if
// atIssue, not now: a token of a one-second lifespan, whose exp Hydra
// truncates to a second, may have expired by the time it is read.
func verifyAt(t *testing.T, s *Server, token string, atIssue bool) (claims, string) {
	t.Helper()
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, s.DiscoveryURL, &disc)
	if disc.Issuer != s.Issuer || disc.JWKSURI != s.JWKSURL {
		t.Fatalf("discovery names issuer %q, jwks %q; want %q, %q", disc.Issuer, disc.JWKSURI, s.Issuer, s.JWKSURL)
	}
	var set jose.JSONWebKeySet
	getJSON(t, disc.JWKSURI, &set)
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatalf("parsing the access token: %v", err)
	}
	kid := tok.Headers[0].KeyID
	keys := set.Key(kid)
	if len(keys) != 1 {
		t.Fatalf("kid %q is %d keys of the JWKS", kid, len(keys))
	}
	var c claims
	if err := tok.Claims(keys[0].Key, &c); err != nil {
		t.Fatalf("verifying the access token: %v", err)
	}
	at := time.Now()
	if atIssue && c.IssuedAt != nil {
		at = c.IssuedAt.Time()
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: s.Issuer, AnyAudience: jwt.Audience{resource}, Time: at}, 0); err != nil {
		t.Fatalf("claims %+v: %v", c, err)
	}
	if c.ID == "" {
		t.Error("no jti")
	}
	return c, kid
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestHydra starts a real Hydra and checks the tokens it issues: their
// signature against its published keys, and the claims provlog reads.
func TestHydra(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()
	other := "http://127.0.0.1:2/mcp"

	t.Run("client credentials", func(t *testing.T) {
		c := s.CreateClient(t, Client{Scopes: []string{"tools", "tasks"}, Audience: []string{resource, other}})
		tok, err := s.ClientCredentials(ctx, c, resource, "tools", "tasks")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := verify(t, s, tok)
		if got.Subject != c.ID || got.ClientID != c.ID || got.Scope != "tools tasks" || !slices.Equal(got.Scp, []string{"tools", "tasks"}) || got.Act != nil {
			t.Errorf("claims %+v; want sub and client_id %s, scope \"tools tasks\", no act", got, c.ID)
		}
		if !slices.Equal(got.Audience, jwt.Audience{resource}) {
			t.Errorf("aud %v; want only %s", got.Audience, resource)
		}
		// Hydra refuses what the client may not have.
		if _, err := s.ClientCredentials(ctx, c, "http://127.0.0.1:3/mcp", "tools"); err == nil {
			t.Error("a token for an audience the client may not name")
		}
		if _, err := s.ClientCredentials(ctx, c, resource, "log"); err == nil {
			t.Error("a token with a scope the client may not have")
		}
		// A token for another resource is one Hydra issues; provlog must refuse it.
		tok, err = s.ClientCredentials(ctx, c, other, "tools")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("short lifespan", func(t *testing.T) {
		c := s.CreateClient(t, Client{Scopes: []string{"tools"}, Audience: []string{resource}, Lifespan: time.Second})
		tok, err := s.ClientCredentials(ctx, c, resource, "tools")
		if err != nil {
			t.Fatal(err)
		}
		// Read once it has expired, as a loaded machine may read it: its
		// claims are checked at its issue.
		time.Sleep(2 * time.Second)
		got, _ := verifyAt(t, s, tok, true)
		// Hydra takes exp and iat from two clock readings, each truncated
		// to a second; the default lifespan would be an hour.
		if d := got.Expiry.Time().Sub(got.IssuedAt.Time()); d < 0 || d > 2*time.Second {
			t.Errorf("exp - iat = %s; want 1s", d)
		}
	})

	t.Run("delegation", func(t *testing.T) {
		d := s.TrustDelegator(t, "alice", "tools", "tasks")
		agent := s.CreateClient(t, Client{Scopes: []string{"tools", "tasks"}, Audience: []string{resource},
			GrantTypes: []string{JWTBearerGrant, "client_credentials"}, Act: true})
		before := s.ActHookCalls()
		tok, err := s.JWTBearer(ctx, agent, d.Assertion(t), resource, "tools", "tasks")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := verify(t, s, tok)
		if got.Subject != "alice" || got.ClientID != agent.ID {
			t.Errorf("sub %q client_id %q; want alice, %s", got.Subject, got.ClientID, agent.ID)
		}
		if sub, _ := got.Act["sub"].(string); sub != agent.ID || len(got.Act) != 1 {
			t.Errorf("act %v; want {sub: %s}", got.Act, agent.ID)
		}
		if got.Ext != nil {
			t.Errorf("ext %v; want none (mirror_top_level_claims is off)", got.Ext)
		}
		if n := s.ActHookCalls() - before; n != 1 {
			t.Errorf("the hook added act %d times; want 1", n)
		}
		// The same agent's own token has no act: the hook adds it only
		// when Hydra issued the token for someone else.
		own, err := s.ClientCredentials(ctx, agent, resource, "tools")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := verify(t, s, own); got.Act != nil || got.Subject != agent.ID {
			t.Errorf("own token: sub %q act %v; want %s, none", got.Subject, got.Act, agent.ID)
		}
		// An assertion for a user the delegator may not speak for, or from
		// an untrusted key, is refused by Hydra.
		bob := *d
		bob.Subject = "bob"
		if _, err := s.JWTBearer(ctx, agent, bob.Assertion(t), resource, "tools"); err == nil {
			t.Error("Hydra accepted an assertion for a subject its issuer is not trusted for")
		}
		if _, err := s.JWTBearer(ctx, agent, d.Assertion(t), resource, "log"); err == nil {
			t.Error("Hydra granted a scope the trust relationship does not allow")
		}
	})

	// The package doc's premise: Hydra v2.3.0 has no RFC 8693 grant. When
	// one that has it is pinned, this fails, and the delegation should
	// move to it.
	t.Run("no token exchange", func(t *testing.T) {
		c := s.CreateClient(t, Client{Scopes: []string{"tools"}, Audience: []string{resource},
			GrantTypes: []string{"client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"}})
		own, err := s.ClientCredentials(ctx, c, resource, "tools")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.token(ctx, url.Values{
			"grant_type":         {"urn:ietf:params:oauth:grant-type:token-exchange"},
			"client_id":          {c.ID},
			"client_secret":      {c.Secret},
			"subject_token":      {own},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
			"audience":           {resource},
		})
		// fosite answers a grant type no handler takes with a bare
		// invalid_request (no hint), whatever the parameters.
		if err == nil || !strings.Contains(err.Error(), `"error":"invalid_request"`) {
			t.Errorf("Hydra's answer to an RFC 8693 exchange: %v; want a refusal", err)
		}
	})

	t.Run("key rotation", func(t *testing.T) {
		c := s.CreateClient(t, Client{Scopes: []string{"tools"}, Audience: []string{resource}})
		first, err := s.ClientCredentials(ctx, c, resource, "tools")
		if err != nil {
			t.Fatal(err)
		}
		_, oldKid := verify(t, s, first)
		kid := s.RotateKey(t)
		second, err := s.ClientCredentials(ctx, c, resource, "tools")
		if err != nil {
			t.Fatal(err)
		}
		if _, got := verify(t, s, second); got != kid || got == oldKid {
			t.Errorf("after rotation signed with %q; want the new key %q (old %q)", got, kid, oldKid)
		}
		verify(t, s, first) // the old key is still published
	})
}

// TestHydraOpaque checks the opaque-token setup: tokens that are not
// JWTs, which Hydra's RFC 7662 endpoint reports active with their claims.
func TestHydraOpaque(t *testing.T) {
	s := Start(t, Options{Opaque: true})
	c := s.CreateClient(t, Client{Scopes: []string{"tools"}, Audience: []string{resource}})
	tok, err := s.ClientCredentials(context.Background(), c, resource, "tools")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(tok, ".") == 2 && strings.HasPrefix(tok, "eyJ") {
		t.Fatalf("opaque strategy issued a JWT: %s", tok)
	}
	resp, err := http.PostForm(s.IntrospectionURL, url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var in struct {
		Active   bool     `json:"active"`
		ClientID string   `json:"client_id"`
		Sub      string   `json:"sub"`
		Aud      []string `json:"aud"`
		Iss      string   `json:"iss"`
		Scope    string   `json:"scope"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		t.Fatal(err)
	}
	if !in.Active || in.ClientID != c.ID || in.Iss != s.Issuer || !slices.Equal(in.Aud, []string{resource}) || in.Scope != "tools" {
		t.Errorf("introspection %+v", in)
	}
}
