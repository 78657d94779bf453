package authn_test

// A JWT access token that names an issuer with introspection alone (no
// key set) is posted to that issuer's endpoint only: another trusted
// issuer's endpoint, asked first, would learn every token of the other,
// credentials and all, and could replay them as its actors.

import (
	"context"
	"testing"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestJWTIntrospectedByItsIssuerAlone(t *testing.T) {
	a, b := authntest.Start(t), authntest.Start(t)
	intro := func(is *authntest.Issuer, prefix string) authn.IssuerConfig {
		return authn.IssuerConfig{
			Issuer:        is.URL,
			ActorPrefix:   prefix,
			Introspection: &authn.IntrospectionConfig{URL: is.IntrospectionURL(), ClientID: "provlog", ClientSecret: "s3cret"},
		}
	}
	cfg := &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{intro(a, "a:"), intro(b, "b:")}}
	au := newAuth(t, cfg, nil, nil)

	// B issues a JWT access token (iss = B) and vouches for it at its
	// introspection endpoint.
	tok := b.Mint(t, b.Claims(resource, "alice"))
	b.Opaque(tok, b.Claims(resource, "alice"))

	id, err := au.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatalf("B's token refused: %v", err)
	}
	if id.Actor != "b:alice" {
		t.Errorf("actor %q, want b:alice", id.Actor)
	}
	if n := a.Introspections(); n != 0 {
		t.Errorf("issuer B's access token (iss %s) was posted to issuer A's introspection endpoint %d time(s): A learns B's tokens", b.URL, n)
	}
}
