package authn_test

// An issuer whose actors are named by email (actor_claim: email) vouches
// for the address only when the token says email_verified: true: an
// account at the issuer may hold any address it was given, unverified,
// and would act as the person who owns it. Such a token is refused, the
// reason in the sidecar's log, unless the issuer's config explicitly
// allows unverified addresses.

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestEmailActorNeedsVerifiedEmail(t *testing.T) {
	is := authntest.Start(t)
	ctx := context.Background()
	var logged bytes.Buffer
	cfg := config(is)
	cfg.Issuers[0].ActorClaim = "email"
	cfg.Issuers[0].ActorPrefix = "corp:"
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(cfg, authn.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	token := func(verified any) string {
		c := is.Claims(resource, "u-123")
		c["email"] = "alice@corp.example"
		if verified != nil {
			c["email_verified"] = verified
		}
		return is.Mint(t, c)
	}
	for name, v := range map[string]any{"no email_verified": nil, "email_verified false": false, `email_verified "true" (a string)`: "true"} {
		logged.Reset()
		id, err := a.Authenticate(ctx, token(v))
		if err == nil {
			t.Errorf("%s: mapped to actor %q", name, id.Actor)
			continue
		}
		if st, code := status(err); st != 401 || code != "invalid_token" {
			t.Errorf("%s: %v, want 401 invalid_token", name, err)
		}
		if strings.Contains(err.Error(), "alice@corp.example") {
			t.Errorf("%s: the client's error names the address: %v", name, err)
		}
		if !strings.Contains(logged.String(), "email_verified") {
			t.Errorf("%s: the sidecar's log (level info) does not say why: %q", name, logged.String())
		}
	}
	if id, err := a.Authenticate(ctx, token(true)); err != nil || id.Actor != "corp:alice@corp.example" {
		t.Errorf("email_verified true: %v %v, want corp:alice@corp.example", id, err)
	}
	// The issuer's config may take unverified addresses, saying so.
	allow := config(is)
	allow.Issuers[0].ActorClaim = "email"
	allow.Issuers[0].ActorPrefix = "corp:"
	allow.Issuers[0].AllowUnverifiedEmail = true
	b := newAuth(t, allow, nil, nil)
	if id, err := b.Authenticate(ctx, token(nil)); err != nil || id.Actor != "corp:alice@corp.example" {
		t.Errorf("allow_unverified_email, no email_verified: %v %v, want corp:alice@corp.example", id, err)
	}
}
