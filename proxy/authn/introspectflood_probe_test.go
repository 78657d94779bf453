package authn_test

// Probe (identity, IdP failure modes): unauthenticated requests drive the
// issuer's introspection endpoint without any bound.
//
// What is wrong: a refused token is remembered nowhere (validated caches
// only good ones) and introspection has no rate limit, so every request
// with a bearer token that is neither static nor a JWT makes the sidecar
// POST it, with its own client credentials, to every configured
// introspection endpoint in turn, each with a 10s timeout. Anyone who can
// reach /mcp or the log API, without any credential, makes the sidecar
// hammer the IdP (and, with a slow IdP, ties up a goroutine and an
// outbound connection per request for 10s). The JWT path was built
// against exactly this ("a flood of them cannot make it hammer the
// issuer": key-set fetches at most once per jwks_min_refresh); the
// introspection path was not.
//
// Observed: the same made-up token sent 50 times costs 50 introspection
// calls.
//
// Fix: remember refused tokens by SHA-256 for a short while (a negative
// cache, e.g. introspectTTL, bounded like validated), and bound the
// introspection calls in flight / per second per issuer (answer 503
// beyond it).

import (
	"context"
	"testing"

	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestProbeIntrospectionFloodUnbounded(t *testing.T) {
	is := authntest.Start(t)
	a := newAuth(t, config(is), nil, nil)
	before := is.Introspections()
	for range 50 {
		if _, err := a.Authenticate(context.Background(), "made-up-opaque-token"); err == nil {
			t.Fatal("a made-up token was accepted")
		}
	}
	if n := is.Introspections() - before; n > 5 {
		t.Errorf("one made-up token, presented 50 times without any credential, cost %d introspection calls at the issuer", n)
	}
}
