package proxy

// An HTTP session lasts no longer than the token it was last used with:
// a JWT's session ends once the token expires (exp, and the clock skew
// every token is given), an introspected token's once its issuer says it
// is no longer active (asked again at most every 30 seconds), rather than
// after sessions.idle (10 minutes) without a request.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestSessionEndsWithItsToken(t *testing.T) {
	f := startOAuthFront(t, func(c *authn.Config) {
		c.ClockSkew = time.Second
		c.Issuers[0].Introspection = &authn.IntrospectionConfig{ClientID: "provlog", ClientSecret: "s3cret"} // its URL discovered
	})
	expiring := f.is.Claims(oauthResource, "alice", "provlog.tools")
	expiring["exp"] = time.Now().Add(2 * time.Second).Unix()
	f.is.Opaque("opaque-of-bob", f.is.Claims(oauthResource, "bob", "provlog.tools"))
	for _, c := range []struct {
		name, token, later string
		revoke             func()
	}{
		{"JWT expiring in 2s", f.is.Mint(t, expiring), f.is.Mint(t, f.is.Claims(oauthResource, "alice", "provlog.tools")), func() {}},
		{"opaque token revoked", "opaque-of-bob", "", func() { f.is.Revoke("opaque-of-bob") }},
	} {
		cs := connectHTTPAs(t, f.url, c.token, "2025-11-25", nil)
		id := cs.ID()
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.revoke()
		ended := func() bool {
			v, ok := f.p.sessions.Load(id)
			return !ok || v.(*frontSession).closed()
		}
		deadline := time.Now().Add(45 * time.Second)
		for !ended() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if !ended() {
			t.Errorf("%s: the session is still open 45s after its token stopped holding", c.name)
			continue
		}
		if c.later != "" {
			// The session is gone for the actor's next token too.
			resp, _ := postMCP(t, f.url, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, map[string]string{
				"Authorization": "Bearer " + c.later, "Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25"})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s: the ended session answered %s to the actor's next token, want 404", c.name, resp.Status)
			}
		}
	}
}

// TestSessionRecheckOnlyWithIssuers: without an OAuth issuer no session
// holds an OAuth token, so sessions are not checked again at all (the
// check woke once a second regardless); a reload that adds an issuer
// starts the checks, and one that drops every issuer stops them again.
func TestSessionRecheckOnlyWithIssuers(t *testing.T) {
	p := startProxy(t, newTestLog(t), nil, nil)
	a, err := authn.New(nil, authn.Options{Static: func(tok string) (string, bool, bool) { return "static", false, tok == testToken }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.HTTPHandler(a))
	t.Cleanup(srv.Close)
	time.Sleep(3 * sessionRecheck)
	if n := p.recheckRounds.Load(); n != 0 {
		t.Errorf("with no OAuth issuer, sessions were checked again %d times in 3 intervals, want none", n)
	}
	is := authntest.Start(t)
	cfg := &authn.Config{Resource: oauthResource, Issuers: []authn.IssuerConfig{{Issuer: is.URL, DiscoveryURL: is.DiscoveryURL()}}}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sessions are checked again after a reload adds an issuer", func() bool { return p.recheckRounds.Load() > 0 })
	if err := a.Reload(nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sessionRecheck) // a round under way ends
	n := p.recheckRounds.Load()
	time.Sleep(3 * sessionRecheck)
	if got := p.recheckRounds.Load() - n; got != 0 {
		t.Errorf("after a reload dropped every issuer, sessions were checked again %d times in 3 intervals, want none", got)
	}
}

// TestSessionRecheckHangingIssuer: an issuer whose introspection endpoint
// hangs holds up the checks of its own sessions only, and those in
// parallel (bounded): another issuer's session whose token expires is
// closed while the hanging issuer's checks are still under way. Checked
// one at a time, each of its 16 sessions took IssuerTimeout, so a round
// took 48 seconds and the other issuer's session waited its turn.
func TestSessionRecheckHangingIssuer(t *testing.T) {
	h := authntest.Start(t)
	f := startOAuthFront(t, func(c *authn.Config) {
		c.ClockSkew = time.Second
		c.Issuers[0].ActorPrefix = "g:"
		c.Issuers = append(c.Issuers, authn.IssuerConfig{Issuer: h.URL, DiscoveryURL: h.DiscoveryURL(), ActorPrefix: "h:", Recheck: time.Second,
			Introspection: &authn.IntrospectionConfig{ClientID: "provlog", ClientSecret: "s3cret"}})
	})
	const hanging = 16 // within the share of new tokens one address may have asked about at once
	for i := range hanging {
		tok := fmt.Sprintf("opaque-of-h-%d", i)
		h.Opaque(tok, h.Claims(oauthResource, fmt.Sprintf("user%d", i), "provlog.tools"))
		cs := connectHTTPAs(t, f.url, tok, "2025-11-25", nil)
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	}
	var inFlight, most, done atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.Before("/introspect", func(r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-r.Context().Done(): // the sidecar gave up (IssuerTimeout)
		case <-release:
		}
		inFlight.Add(-1)
		done.Add(1)
	})
	expiring := f.is.Claims(oauthResource, "alice", "provlog.tools")
	expiring["exp"] = time.Now().Add(2 * time.Second).Unix()
	cs := connectHTTPAs(t, f.url, f.is.Mint(t, expiring), "2025-11-25", nil)
	id := cs.ID()
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	closed := func() bool {
		v, ok := f.p.sessions.Load(id)
		return !ok || v.(*frontSession).closed()
	}
	for deadline := time.Now().Add(4 * time.Minute); !(closed() && most.Load() > 1) && done.Load() < hanging && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the working issuer's session closed: %v, after %d checks of the hanging issuer's sessions gave up", closed(), done.Load())
	if !closed() {
		t.Errorf("the session of an expired token of a working issuer was still open after %d checks of a hanging issuer's sessions had given up", done.Load())
	}
	if m := most.Load(); m < 2 {
		t.Errorf("the hanging issuer's %d sessions were checked %d at a time, want them in parallel", hanging, m)
	}
}

// TestSessionRecheckAsksItsIssuer: an opaque token is checked again with
// the issuer that vouched for it, not with every issuer: a session whose
// token that issuer revoked is closed though another issuer's
// introspection endpoint hangs (asked too, its silence made the token's
// fate undecided, so the session stayed open as long as it hung).
func TestSessionRecheckAsksItsIssuer(t *testing.T) {
	h := authntest.Start(t)
	f := startOAuthFront(t, func(c *authn.Config) {
		c.Issuers[0].ActorPrefix, c.Issuers[0].Recheck = "g:", time.Second
		c.Issuers[0].Introspection = &authn.IntrospectionConfig{ClientID: "provlog", ClientSecret: "s3cret"}
		c.Issuers = append(c.Issuers, authn.IssuerConfig{Issuer: h.URL, DiscoveryURL: h.DiscoveryURL(), ActorPrefix: "h:",
			Introspection: &authn.IntrospectionConfig{ClientID: "provlog", ClientSecret: "s3cret"}})
	})
	f.is.Opaque("opaque-of-g", f.is.Claims(oauthResource, "bob", "provlog.tools"))
	cs := connectHTTPAs(t, f.url, "opaque-of-g", "2025-11-25", nil)
	id := cs.ID()
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var hung atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.Before("/introspect", func(r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		hung.Add(1)
	})
	f.is.Revoke("opaque-of-g")
	closed := func() bool {
		v, ok := f.p.sessions.Load(id)
		return !ok || v.(*frontSession).closed()
	}
	for deadline := time.Now().Add(time.Minute); !closed() && hung.Load() < 5 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !closed() {
		t.Errorf("the session of an opaque token its issuer revoked is still open after another issuer's introspection endpoint hung %d times", hung.Load())
	}
}
