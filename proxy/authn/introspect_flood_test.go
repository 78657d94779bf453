package authn_test

// Requests with bearer tokens nobody vouches for cannot make the sidecar
// hammer the issuer's introspection endpoint, with its own credentials,
// as key-set fetches cannot (jwks_min_refresh): a token refused is
// refused again for a while without a call, and calls beyond a rate per
// issuer are answered 503 without one.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestIntrospectionFloodBounded(t *testing.T) {
	is := authntest.Start(t)
	c := &clock{t: time.Now()}
	a := newAuth(t, config(is), c, nil)
	ctx := context.Background()
	for range 50 {
		if _, err := a.Authenticate(ctx, "made-up-opaque-token"); err == nil {
			t.Fatal("a made-up token was accepted")
		}
	}
	if n := is.Introspections(); n != 1 {
		t.Errorf("one made-up token, presented 50 times without any credential, cost %d introspection calls at the issuer, want 1", n)
	}
	c.add(11 * time.Second)
	if _, err := a.Authenticate(ctx, "made-up-opaque-token"); err == nil || is.Introspections() != 2 {
		t.Errorf("the token 11s later: %v, %d calls; want it asked about again", err, is.Introspections())
	}

	// Many made-up tokens: a burst goes through, the rest are 503.
	before, unavailable := is.Introspections(), 0
	for i := range 100 {
		_, err := a.Authenticate(ctx, fmt.Sprintf("made-up-%d", i))
		if st, _ := status(err); st == 503 {
			unavailable++
		}
	}
	if n := is.Introspections() - before; n > 40 || unavailable != 100-int(n) {
		t.Errorf("100 made-up tokens at once cost %d introspection calls (%d answered 503); want at most 40, the rest 503", n, unavailable)
	}
	// The rate refills: a second later, 20 more may be asked about.
	c.add(time.Second)
	is.Opaque("good-after-flood", is.Claims(resource, "svc-backup"))
	if _, err := a.Authenticate(ctx, "good-after-flood"); err != nil {
		t.Errorf("a good token a second after the flood: %v", err)
	}
}
