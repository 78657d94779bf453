package authn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// FuzzAuthenticate feeds the token path (Authorization header, JWS
// parsing, claims) arbitrary bytes with the key set cached. Nothing may
// panic, and whatever is accepted must be the good token's own identity:
// no input forges another actor or other claims.
func FuzzAuthenticate(f *testing.F) {
	is := authntest.Start(f)
	cfg := &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{{Issuer: is.URL, JWKSURL: is.JWKSURL()}},
		Scopes: authn.Scopes{Tools: []string{"provlog.tools"}}}
	if err := cfg.Check(); err != nil {
		f.Fatal(err)
	}
	a, err := authn.New(cfg, authn.Options{})
	if err != nil {
		f.Fatal(err)
	}
	claims := is.Claims(resource, "alice", "provlog.tools")
	claims["act"] = map[string]any{"sub": "agent", "act": map[string]any{"sub": "orchestrator"}}
	good := is.Mint(f, claims)
	want, err := a.Authenticate(context.Background(), good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer " + good)
	for _, b := range is.BadTokens(f, resource) {
		f.Add("Bearer " + b.Token)
	}
	f.Add("Bearer a.b.c")
	f.Add("bearer e30.e30.")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptestRequest(header)
		id, err := a.Request(r)
		if err != nil {
			if ch := a.Challenge(err); strings.ContainsAny(ch, "\r\n") {
				t.Fatalf("challenge with a line break: %q", ch)
			}
			return
		}
		if id.Actor != want.Actor || mustJSON(id.Scopes) != mustJSON(want.Scopes) || id.Auth.Subject != want.Auth.Subject ||
			mustJSON(id.Auth.Act) != mustJSON(want.Auth.Act) || id.Auth.JTI != want.Auth.JTI {
			t.Fatalf("accepted %q as %+v (%s), want the good token's %+v", header, id, mustJSON(id.Auth), want)
		}
	})
}
