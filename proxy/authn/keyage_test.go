package authn_test

// A key the issuer withdrew from its key set stops verifying tokens once
// the set is fetched again: on a token naming a kid the set lacks (at
// most once per jwks_min_refresh), and at the latest once the set is
// jwks_max_age old (default 5 minutes; it was an hour).

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestWithdrawnKeyDroppedWithinMaxAge(t *testing.T) {
	ctx := context.Background()
	for name, maxAge := range map[string]time.Duration{"default": 0, "jwks_max_age 2m": 2 * time.Minute} {
		is := authntest.Start(t)
		c := &clock{t: time.Now()}
		cfg := config(is)
		cfg.KeyMaxAge = maxAge
		a := newAuth(t, cfg, c, nil)
		long := func(sub string) string {
			cl := is.Claims(resource, sub)
			cl["exp"] = c.now().Add(3 * time.Hour).Unix()
			return is.Mint(t, cl)
		}
		withOld := long("alice") // signed by the first key, while it signs
		unseen := long("bob")    // so is this one, not presented yet
		if _, err := a.Authenticate(ctx, withOld); err != nil {
			t.Fatal(err)
		}
		is.Rotate(t, jose.ES256)
		is.Withdraw() // only the new key is published now
		wait := 6 * time.Minute
		if maxAge != 0 {
			wait = maxAge + time.Minute
		}
		c.add(wait)
		for _, tok := range []string{unseen, withOld} {
			if id, err := a.Authenticate(ctx, tok); err == nil {
				t.Errorf("%s: %s after the issuer withdrew its key, a token it signed still acts as %s", name, wait, id.Actor)
			}
		}
		if _, err := a.Authenticate(ctx, long("carol")); err != nil {
			t.Errorf("%s: a token of the new key: %v", name, err)
		}
	}
	bad := &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{{Issuer: "https://idp.example/", JWKSURL: "https://idp.example/jwks"}}, KeyMaxAge: 2 * time.Second}
	if err := bad.Check(); err == nil {
		t.Error("jwks_max_age 2s (under jwks_min_refresh) was taken")
	}
}
