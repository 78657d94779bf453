package authn_test

// An opaque token goes to every issuer with an introspection endpoint.
// It is refused (401) only when each of them said no; when one could not
// be asked and none said yes, no one can tell, and the answer is 503. An
// issuer that hangs is given up on after a few seconds, and delays no
// other issuer's tokens meanwhile.

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// introspecting is the config of issuer is with introspection alone,
// at url (its own endpoint when "").
func introspecting(is *authntest.Issuer, prefix, url string) authn.IssuerConfig {
	if url == "" {
		url = is.IntrospectionURL()
	}
	return authn.IssuerConfig{Issuer: is.URL, ActorPrefix: prefix,
		Introspection: &authn.IntrospectionConfig{URL: url, ClientID: "provlog", ClientSecret: "s3cret"}}
}

func TestIntrospectionUndecidedWhenAnIssuerIsDown(t *testing.T) {
	a, b := authntest.Start(t), authntest.Start(t)
	ctx := context.Background()
	down := "http://127.0.0.1:1/introspect"
	for _, order := range []string{"down first", "down last"} {
		issuers := []authn.IssuerConfig{introspecting(a, "a:", down), introspecting(b, "b:", "")}
		if order == "down last" {
			issuers[0], issuers[1] = issuers[1], issuers[0]
		}
		au := newAuth(t, &authn.Config{Resource: resource, Issuers: issuers}, nil, nil)
		_, err := au.Authenticate(ctx, "opaque-only-a-might-know")
		if st, _ := status(err); st != http.StatusServiceUnavailable {
			t.Errorf("%s: issuer A cannot be asked, B says inactive: %v (status %d), want 503: A might have vouched for it", order, err, st)
		}
		b.Opaque("opaque-of-b-"+order, b.Claims(resource, "carol"))
		if id, err := au.Authenticate(ctx, "opaque-of-b-"+order); err != nil || id.Actor != "b:carol" {
			t.Errorf("%s: B's token while A is down: %v %v, want b:carol", order, id, err)
		}
	}
	// Every issuer says no: 401.
	au := newAuth(t, &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{introspecting(a, "a:", ""), introspecting(b, "b:", "")}}, nil, nil)
	if _, err := au.Authenticate(ctx, "opaque-nobody-knows"); err == nil {
		t.Error("a token no issuer knows was accepted")
	} else if st, code := status(err); st != http.StatusUnauthorized || code != "invalid_token" {
		t.Errorf("a token every issuer said no to: %v, want 401 invalid_token", err)
	}
}

func TestHangingIssuerDelaysNoOther(t *testing.T) {
	a, b := authntest.Start(t), authntest.Start(t)
	var aEnded, bAskedAfter atomic.Bool
	a.Before("/introspect", func(r *http.Request) {
		<-r.Context().Done() // hangs until the sidecar gives up
		aEnded.Store(true)
	})
	b.Before("/introspect", func(r *http.Request) {
		bAskedAfter.Store(aEnded.Load())
	})
	b.Opaque("opaque-of-b", b.Claims(resource, "carol"))
	au := newAuth(t, &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{introspecting(a, "a:", ""), introspecting(b, "b:", "")}}, nil, nil)
	id, err := au.Authenticate(context.Background(), "opaque-of-b")
	if err != nil || id.Actor != "b:carol" {
		t.Fatalf("B's token while A hangs: %v %v, want b:carol", id, err)
	}
	if bAskedAfter.Load() {
		t.Error("issuer B was asked about its token only once the sidecar had given up on issuer A, which hung: A's hang delayed B's token")
	}
}

func TestSlowIssuerGivenUp(t *testing.T) {
	// An issuer whose answers come after a few seconds each: 2.5s for
	// the discovery document and again for the key set, or 6s for an
	// introspection answer. A token's first check waits for neither.
	slow := func(d time.Duration) func(*http.Request) {
		return func(r *http.Request) {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
			}
		}
	}
	is := authntest.Start(t)
	is.Before("/.well-known/openid-configuration", slow(2500*time.Millisecond))
	is.Before("/jwks", slow(2500*time.Millisecond))
	is.Before("/introspect", slow(6*time.Second))
	is.Opaque("opaque-slow", is.Claims(resource, "carol"))
	ctx := context.Background()
	for name, tok := range map[string]string{"JWT": is.Mint(t, is.Claims(resource, "alice")), "opaque": "opaque-slow"} {
		au := newAuth(t, config(is), nil, nil) // each discovers anew
		id, err := au.Authenticate(ctx, tok)
		if st, _ := status(err); st != http.StatusServiceUnavailable {
			t.Errorf("%s token of an issuer answering after seconds: %v %v, want 503 (given up on)", name, id, err)
		}
	}
}
