package authn_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// TestReload: a reloaded config takes effect for the next token: a new
// issuer is trusted, a dropped one is not, a changed actor mapping and
// changed scopes apply to tokens validated before; an identity had before
// the reload keeps the scopes it was judged under; an issuer that fetches
// from the same places keeps its keys; Reload of an equal config changes
// nothing.
func TestReload(t *testing.T) {
	ctx := context.Background()
	one, two := authntest.Start(t), authntest.Start(t)
	cfg := config(one)
	a := newAuth(t, cfg, nil, nil)
	tok1 := one.Mint(t, one.Claims(resource, "alice", "provlog.tools"))
	tok2 := two.Mint(t, two.Claims(resource, "bob", "provlog.tools"))
	before, err := a.Authenticate(ctx, tok1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, tok2); err == nil {
		t.Fatal("a token of an issuer not configured was accepted")
	}
	if err := a.Require(before, authn.GroupTools); err != nil {
		t.Fatal(err)
	}

	// Reloading the same config: nothing changes, the token stays
	// remembered (no fetch, no new validation).
	same := config(one)
	if err := same.Check(); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(same); err != nil {
		t.Fatal(err)
	}
	if id, err := a.Authenticate(ctx, tok1); err != nil || id != before {
		t.Fatalf("after reloading an equal config: %v, %v; want the remembered identity", id, err)
	}

	// The second issuer is added with its own prefix and actor claim, the
	// first gets a new prefix, and the tools group needs another scope.
	next := config(one)
	next.Issuers[0].ActorPrefix = "corp:"
	next.Issuers = append(next.Issuers, authn.IssuerConfig{Issuer: two.URL, JWKSURL: two.JWKSURL(), ActorPrefix: "two:"})
	next.Scopes.Tools = []string{"provlog.tools.v2"}
	next.Resource = resource + "/v2"
	if err := next.Check(); err != nil {
		t.Fatal(err)
	}
	fetched := one.Fetches()
	if err := a.Reload(next); err != nil {
		t.Fatal(err)
	}
	// The identity had before keeps the scopes it was judged under (a
	// request in flight finishes under the old config)...
	if err := a.Require(before, authn.GroupTools); err != nil {
		t.Errorf("an identity from before the reload was judged by the new scopes: %v", err)
	}
	// ...but the same token, presented again, is validated anew: its
	// audience is no longer this resource.
	if _, err := a.Authenticate(ctx, tok1); err == nil || !strings.Contains(err.Error(), "audience") {
		t.Errorf("a token for the old resource after the reload: %v, want refused for its audience", err)
	}
	res2 := resource + "/v2"
	id1, err := a.Authenticate(ctx, one.Mint(t, one.Claims(res2, "alice", "provlog.tools")))
	if err != nil {
		t.Fatal(err)
	}
	if id1.Actor != "corp:alice" {
		t.Errorf("actor %q after the reload, want corp:alice", id1.Actor)
	}
	if err := a.Require(id1, authn.GroupTools); err == nil {
		t.Error("a token without the new tools scope may use tools")
	}
	if one.Fetches() != fetched {
		t.Errorf("issuer one's keys were fetched again (%d, then %d); its URLs did not change", fetched, one.Fetches())
	}
	id2, err := a.Authenticate(ctx, two.Mint(t, two.Claims(res2, "bob", "provlog.tools.v2")))
	if err != nil {
		t.Fatalf("the added issuer's token: %v", err)
	}
	if id2.Actor != "two:bob" || a.Require(id2, authn.GroupTools) != nil {
		t.Errorf("the added issuer's token: actor %q, tools allowed %v", id2.Actor, a.Allows(id2, authn.GroupTools))
	}
	if got := a.Config().Resource; got != res2 {
		t.Errorf("Config().Resource = %q", got)
	}
	// The metadata and challenges name the new resource and issuers.
	rec := httptest.NewRecorder()
	a.Metadata().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, authn.MetadataPath, nil))
	if body := rec.Body.String(); !strings.Contains(body, two.URL) || !strings.Contains(body, "provlog.tools.v2") {
		t.Errorf("metadata after the reload: %s", body)
	}
	if ch := a.Challenge(authn.ErrNoToken); !strings.Contains(ch, authn.MetadataPath+"/mcp/v2") {
		t.Errorf("challenge after the reload: %s", ch)
	}

	reloadDropping(t, a, one, two, next.Scopes)
}

// reloadDropping drops issuer one from a's config: its tokens are
// refused, two's still work; then no auth: at all leaves static tokens
// only.
func reloadDropping(t *testing.T, a *authn.Authenticator, one, two *authntest.Issuer, scopes authn.Scopes) {
	t.Helper()
	ctx := context.Background()
	res2 := resource + "/v2"
	last := &authn.Config{Resource: res2, Issuers: []authn.IssuerConfig{{Issuer: two.URL, JWKSURL: two.JWKSURL(), ActorPrefix: "two:"}},
		Scopes: scopes}
	if err := last.Check(); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(last); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, one.Mint(t, one.Claims(res2, "alice", "provlog.tools"))); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("a dropped issuer's token: %v, want refused as not trusted", err)
	}
	if _, err := a.Authenticate(ctx, two.Mint(t, two.Claims(res2, "bob"))); err != nil {
		t.Errorf("the remaining issuer's token: %v", err)
	}
	if err := a.Reload(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, two.Mint(t, two.Claims(res2, "bob"))); err == nil {
		t.Error("an OAuth token was accepted with no issuers configured")
	}
	rec := httptest.NewRecorder()
	a.Metadata().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, authn.MetadataPath, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("metadata without issuers: %d, want 404", rec.Code)
	}
}

// TestKeyRefreshFloor: jwks_min_refresh sets the least time between two
// fetches of an issuer's keys (a new kid is taken once it has passed, not
// before), within bounds Check enforces.
func TestKeyRefreshFloor(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Millisecond, 2 * time.Hour} {
		cfg := &authn.Config{KeyRefresh: d}
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "jwks_min_refresh") {
			t.Errorf("jwks_min_refresh %s: %v, want refused", d, err)
		}
	}
	ctx := context.Background()
	for _, floor := range []time.Duration{0, 2 * time.Second, 30 * time.Second} {
		is := authntest.Start(t)
		c := &clock{t: time.Now()}
		cfg := config(is)
		cfg.KeyRefresh = floor
		a := newAuth(t, cfg, c, nil)
		want := floor
		if floor == 0 {
			want = authn.DefaultKeyRefresh
		}
		if got := a.Config().KeyRefresh; got != want {
			t.Errorf("KeyRefresh %s, want %s", got, want)
		}
		long := func(sub string) string {
			cl := is.Claims(resource, sub)
			cl["exp"] = c.now().Add(3 * time.Hour).Unix()
			return is.Mint(t, cl)
		}
		if _, err := a.Authenticate(ctx, long("alice")); err != nil {
			t.Fatal(err)
		}
		is.Rotate(t, jose.ES256)
		fresh := long("bob")
		c.add(want - 100*time.Millisecond)
		if _, err := a.Authenticate(ctx, fresh); err == nil {
			t.Errorf("floor %s: a new kid was taken %s after the last fetch", want, want-100*time.Millisecond)
		}
		c.add(200 * time.Millisecond)
		if _, err := a.Authenticate(ctx, fresh); err != nil {
			t.Errorf("floor %s: a new kid %s after the last fetch: %v", want, want+100*time.Millisecond, err)
		}
		if n := is.Fetches(); n != 2 {
			t.Errorf("floor %s: %d key set fetches, want 2", want, n)
		}
	}
}

// TestReloadConcurrent: requests authenticate while the config is
// reloaded back and forth; each is judged wholly under one config (its
// actor is one of the two prefixes', never a mix), and the race detector
// finds nothing.
func TestReloadConcurrent(t *testing.T) {
	is := authntest.Start(t)
	cfgs := make([]*authn.Config, 2)
	for i, prefix := range []string{"a:", "b:"} {
		cfgs[i] = config(is)
		cfgs[i].Issuers[0].ActorPrefix = prefix
		if err := cfgs[i].Check(); err != nil {
			t.Fatal(err)
		}
	}
	a := newAuth(t, cfgs[0], nil, nil)
	tok := is.Mint(t, is.Claims(resource, "alice", "provlog.tools"))
	ctx := context.Background()
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				id, err := a.Authenticate(ctx, tok)
				if err == nil && id.Actor != "a:alice" && id.Actor != "b:alice" {
					err = fmt.Errorf("actor %q", id.Actor)
				}
				if err == nil {
					err = a.Require(id, authn.GroupTools)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 200 {
		if err := a.Reload(cfgs[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
