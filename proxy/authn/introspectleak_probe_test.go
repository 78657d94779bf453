package authn_test

// Probe (identity): a JWT access token that names its issuer in iss is
// sent to ANOTHER trusted issuer's introspection endpoint.
//
// What is wrong: when the issuer a JWT names (iss) has no key set of its
// own (introspection only), verifyJWT hands the token to state.introspect,
// which posts it to every configured introspection endpoint in config
// order, not just to the named issuer's. So issuer A (listed first)
// receives, credentials and all, every access token issuer B issues to
// B's clients, and can replay them to provlog as B's actors. The code
// already guards the neighbouring case (a JWT of an issuer with keys whose
// claims do not parse "went to the introspection endpoints of the others,
// credentials and all"), but not this one.
//
// Observed: A's /introspect is called once for B's token (A answers
// inactive, then B answers active and the token is accepted as b:alice).
//
// Fix: in verifyJWT, when the named issuer has no keys, introspect with
// that issuer alone (is.introspection, then st.identity), never with the
// others; only tokens that name no trusted issuer may be offered around,
// and arguably not even those.

import (
	"context"
	"testing"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestProbeJWTOfIntrospectionIssuerGoesToOtherIssuer(t *testing.T) {
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
