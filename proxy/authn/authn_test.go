package authn_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

const resource = "https://provlog.test/mcp"

// clock is a test clock the key-set rate limit can be stepped past.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func config(is *authntest.Issuer) *authn.Config {
	return &authn.Config{
		Resource: resource,
		Issuers: []authn.IssuerConfig{{
			Issuer: is.URL, DiscoveryURL: is.DiscoveryURL(),
			Introspection: &authn.IntrospectionConfig{ClientID: "provlog", ClientSecret: "s3cret"},
		}},
		Scopes: authn.Scopes{Tools: []string{"provlog.tools"}, Tasks: []string{"provlog.tasks"}, Log: []string{"provlog.log"}},
	}
}

func newAuth(t *testing.T, cfg *authn.Config, c *clock, static authn.StaticFunc) *authn.Authenticator {
	t.Helper()
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	opts := authn.Options{Static: static}
	if c != nil {
		opts.Now = c.now
	}
	a, err := authn.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func status(err error) (int, string) {
	var e *authn.Error
	if !errors.As(err, &e) {
		return 0, ""
	}
	return e.Status, e.Code
}

// TestBadTokens: every token of the refusal table is refused with 401
// invalid_token, and its description never holds the token.
func TestBadTokens(t *testing.T) {
	is := authntest.Start(t)
	var logged bytes.Buffer
	cfg := config(is)
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	a, err := authn.New(cfg, authn.Options{Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	// A good token first, so the key set is cached as in a running sidecar.
	if _, err := a.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, "alice"))); err != nil {
		t.Fatalf("good token: %v", err)
	}
	for _, b := range is.BadTokens(t, resource) {
		id, err := a.Authenticate(context.Background(), b.Token)
		st, code := status(err)
		if err == nil || st != b.Status || code != b.Code {
			t.Errorf("%s: identity %v, error %v (status %d, code %q); want %d %s", b.Name, id, err, st, code, b.Status, b.Code)
			continue
		}
		if strings.Contains(err.Error(), b.Token) || strings.Contains(a.Challenge(err), b.Token) || strings.Contains(logged.String(), b.Token) {
			t.Errorf("%s: the error or the log repeats the token", b.Name)
		}
		sum := sha256.Sum256([]byte(b.Token))
		if !strings.Contains(logged.String(), hex.EncodeToString(sum[:])) {
			t.Errorf("%s: the refusal is not logged by the token's hash", b.Name)
		}
		t.Logf("%s: %v", b.Name, err)
	}
}

// TestGoodToken: a token's claims map to the actor (issuer prefix and
// sub) and to the entries' auth member, act chain included.
func TestGoodToken(t *testing.T) {
	is := authntest.Start(t)
	a := newAuth(t, config(is), nil, nil)
	c := is.Claims(resource, "alice", "provlog.tools", "provlog.tasks")
	c["act"] = map[string]any{"sub": "agent-7", "client_id": "agent-7", "act": map[string]any{"sub": "orchestrator"}}
	c["aud"] = []string{"https://other.example", resource}
	tok := is.Mint(t, c)
	id, err := a.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(is.URL, "http://")
	sum := sha256.Sum256([]byte(tok))
	want := &log.Auth{Issuer: is.URL, Subject: "alice", ClientID: "agent-7", JTI: c["jti"].(string),
		Scope: "provlog.tools provlog.tasks", TokenSHA256: hex.EncodeToString(sum[:]), Via: log.AuthViaJWT,
		Act: &log.Act{Subject: "agent-7", ClientID: "agent-7", Act: &log.Act{Subject: "orchestrator"}}}
	if id.Actor != host+":alice" {
		t.Errorf("actor %q, want %q", id.Actor, host+":alice")
	}
	if g, w := mustJSON(id.Auth), mustJSON(want); g != w {
		t.Errorf("auth\n got %s\nwant %s", g, w)
	}
	for g, ok := range map[authn.Group]bool{authn.GroupTools: true, authn.GroupTasks: true, authn.GroupLog: false} {
		err := a.Require(id, g)
		if (err == nil) != ok {
			t.Errorf("group %s: %v, want allowed=%v", g, err, ok)
		}
		if st, code := status(err); err != nil && (st != 403 || code != "insufficient_scope") {
			t.Errorf("group %s: %d %s, want 403 insufficient_scope", g, st, code)
		}
	}
	if ch := a.Challenge(a.Require(id, authn.GroupLog)); !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="provlog.log"`) {
		t.Errorf("challenge %s", ch)
	}
	// The entry it goes into carries it, and parses back the same.
	b, err := (&log.Entry{Kind: "call", Time: time.Now(), Actor: id.Actor, Auth: id.Auth, Fields: map[string]any{"server": "s"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(e.Auth), mustJSON(want); g != w {
		t.Errorf("parsed auth\n got %s\nwant %s", g, w)
	}
	if strings.Contains(string(b), tok) {
		t.Error("the entry holds the token")
	}
}

// TestActorMapping: email or a custom claim, and a prefix per issuer.
func TestActorMapping(t *testing.T) {
	is := authntest.Start(t)
	cfg := config(is)
	cfg.Issuers[0].ActorClaim = "email"
	cfg.Issuers[0].ActorPrefix = "corp:"
	a := newAuth(t, cfg, nil, nil)
	c := is.Claims(resource, "u-123")
	c["email"] = "alice@corp.example"
	c["email_verified"] = true
	id, err := a.Authenticate(context.Background(), is.Mint(t, c))
	if err != nil || id.Actor != "corp:alice@corp.example" {
		t.Fatalf("actor %v, %v", id, err)
	}
	c["email_verified"] = false
	if _, err := a.Authenticate(context.Background(), is.Mint(t, c)); err == nil {
		t.Error("an unverified email was mapped to an actor")
	}
	delete(c, "email")
	if _, err := a.Authenticate(context.Background(), is.Mint(t, c)); err == nil {
		t.Error("a token without the actor claim was accepted")
	}
	// Ids a reader could take for others, and the sidecar's own, are
	// refused as static ones are: they were mapped as given.
	prov := config(is)
	prov.Issuers[0].ActorPrefix = "prov"
	b := newAuth(t, prov, nil, nil)
	for _, sub := range []string{"bob ", " bob", "bob\u0085", "bob\u009b31m", "log", "log.retention", "log.operator", "LOG.x"} {
		if id, err := b.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, sub))); err == nil {
			t.Errorf("sub %q was mapped to actor %q", sub, id.Actor)
		} else if st, code := status(err); st != 401 || code != "invalid_token" {
			t.Errorf("sub %q: %v", sub, err)
		}
	}
	if id, err := b.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, "bob"))); err != nil || id.Actor != "provbob" {
		t.Errorf("sub bob: %v %v", id, err)
	}
	// So are ids holding a character that shows as nothing, naming it:
	// "provbob\u200b" reads as provbob in every report.
	for sub, want := range map[string]string{"bob\u200b": "U+200B, at character 8", "\u202ebob": "U+202E, at character 5", "bo\u3164b": "U+3164, at character 7", "bob\ufe0f": "U+FE0F, at character 8"} {
		if id, err := b.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, sub))); err == nil {
			t.Errorf("sub %q was mapped to actor %q", sub, id.Actor)
		} else if st, code := status(err); st != 401 || code != "invalid_token" || !strings.Contains(err.Error(), want) {
			t.Errorf("sub %q: %v, want 401 invalid_token saying %q", sub, err, want)
		}
	}
	// A client's own token (sub is its client_id or azp, no act) acts in
	// the issuer's client namespace, never as the person of that name; a
	// person's sub in that namespace is refused.
	own := is.Claims(resource, "alice")
	own["client_id"] = "alice"
	azp := is.Claims(resource, "alice")
	delete(azp, "client_id")
	azp["azp"] = "alice"
	for _, c := range []map[string]any{own, azp} {
		if id, err := b.Authenticate(context.Background(), is.Mint(t, c)); err != nil || id.Actor != "provclient:alice" || id.Auth.ClientID != "alice" {
			t.Errorf("a client's own token: %v %v, want actor provclient:alice", id, err)
		}
	}
	own["act"] = map[string]any{"sub": "agent-7"}
	if id, err := b.Authenticate(context.Background(), is.Mint(t, own)); err != nil || id.Actor != "provalice" {
		t.Errorf("a delegated token whose sub is its client's: %v %v, want actor provalice", id, err)
	}
	if id, err := b.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, "client:alice"))); err == nil {
		t.Errorf("a person's sub client:alice was mapped to actor %q", id.Actor)
	}
}

// TestConfigCheck: what the auth: section refuses.
func TestConfigCheck(t *testing.T) {
	is := authntest.Start(t)
	for name, mut := range map[string]func(*authn.Config){
		"no resource":       func(c *authn.Config) { c.Resource = "" },
		"resource relative": func(c *authn.Config) { c.Resource = "/mcp" },
		"skew too large":    func(c *authn.Config) { c.ClockSkew = time.Hour },
		"HS256":             func(c *authn.Config) { c.Issuers[0].Algorithms = []string{"HS256"} },
		"none":              func(c *authn.Config) { c.Issuers[0].Algorithms = []string{"none"} },
		"both urls":         func(c *authn.Config) { c.Issuers[0].JWKSURL = is.JWKSURL() },
		"no keys":           func(c *authn.Config) { c.Issuers[0].DiscoveryURL, c.Issuers[0].Introspection = "", nil },
		"twice":             func(c *authn.Config) { c.Issuers = append(c.Issuers, c.Issuers[0]) },
		"prefix collides": func(c *authn.Config) {
			c.Issuers[0].ActorPrefix = "a:"
			c.Issuers = append(c.Issuers, authn.IssuerConfig{Issuer: "https://b.example/", JWKSURL: "https://b.example/jwks", ActorPrefix: "a:b"})
		},
		"scope with space":        func(c *authn.Config) { c.Scopes.Log = []string{"a b"} },
		"introspection no client": func(c *authn.Config) { c.Issuers[0].Introspection.ClientID = "" },
	} {
		cfg := config(is)
		mut(cfg)
		if err := cfg.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// An issuer every actor of which would be provlog's own, by its
	// actor_prefix or by the default one its host makes.
	for name, mut := range map[string]func(*authn.IssuerConfig){
		"prefix": func(c *authn.IssuerConfig) { c.ActorPrefix = "Provlog.idp:" },
		// Read as provlog's: digit zero for o, capital I for l.
		"look-alike prefix": func(c *authn.IssuerConfig) { c.ActorPrefix = "pr0vIog.idp:" },
		"default prefix": func(c *authn.IssuerConfig) {
			c.Issuer, c.DiscoveryURL = "https://provlog.example/", "https://provlog.example/oidc"
		},
	} {
		cfg := config(is)
		mut(&cfg.Issuers[0])
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), `actor ids beginning "provlog.", or reading as such, are provlog's own; set actor_prefix`) {
			t.Errorf("%s in provlog's namespace: %v", name, err)
		}
	}
	cfg := config(is)
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(is.URL, "http://")
	if !cfg.Owns(host+":bob") || cfg.Owns(host+":") || cfg.Owns("bob") {
		t.Error("Owns: wrong namespace")
	}
}

// TestKeyRotation: a token of a new key is accepted once the set is
// fetched again, which its unknown kid causes; unknown kids do not make
// the sidecar fetch more than once per MinRefresh; a withdrawn key's
// tokens stop working when the set is next fetched.
func TestKeyRotation(t *testing.T) {
	is := authntest.Start(t)
	c := &clock{t: time.Now()}
	a := newAuth(t, config(is), c, nil)
	ctx := context.Background()
	long := func(sub string) string { // valid for the whole test, clock steps included
		cl := is.Claims(resource, sub)
		cl["exp"] = c.now().Add(3 * time.Hour).Unix()
		return is.Mint(t, cl)
	}
	old := long("alice")
	if _, err := a.Authenticate(ctx, old); err != nil {
		t.Fatal(err)
	}
	if n := is.Fetches(); n != 1 {
		t.Fatalf("%d key set fetches, want 1", n)
	}
	// Unknown kids in a flood: one fetch at most per MinRefresh.
	c.add(11 * time.Second)
	for _, b := range is.BadTokens(t, resource) {
		if b.Name == "unknown kid" {
			for range 50 {
				a.Authenticate(ctx, b.Token) // a refused token is not remembered
			}
		}
	}
	if n := is.Fetches(); n != 2 {
		t.Fatalf("%d key set fetches after 50 unknown kids, want 2", n)
	}
	// The issuer rotates to an ES256 key; its first token makes the
	// sidecar fetch again (once the rate limit allows).
	is.Rotate(t, jose.ES256)
	fresh := long("bob")
	if _, err := a.Authenticate(ctx, fresh); err == nil {
		t.Fatal("a new kid was accepted within MinRefresh of the last fetch")
	}
	c.add(11 * time.Second)
	id, err := a.Authenticate(ctx, fresh)
	if err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if !strings.HasSuffix(id.Actor, ":bob") {
		t.Errorf("actor %q", id.Actor)
	}
	if _, err := a.Authenticate(ctx, old); err != nil {
		t.Errorf("the old key is still published, but its token failed: %v", err)
	}
	// The old key is withdrawn: the next fetch (jwks_max_age on) forgets it,
	// and with it the tokens it validated.
	is.Withdraw()
	c.add(61 * time.Minute)
	if _, err := a.Authenticate(ctx, long("carol")); err != nil {
		t.Fatal(err)
	}
	if n := is.Fetches(); n != 4 {
		t.Errorf("%d key set fetches, want 4 (the set was over jwks_max_age old)", n)
	}
	if _, err := a.Authenticate(ctx, old); err == nil {
		t.Error("a token of a withdrawn key was still accepted")
	}
}

// TestIssuerDown: no key set can be had: 503, named; a good token works
// once the issuer is back.
func TestIssuerDown(t *testing.T) {
	is := authntest.Start(t)
	cfg := config(is)
	cfg.Issuers[0].DiscoveryURL = ""
	cfg.Issuers[0].JWKSURL = "http://127.0.0.1:1/jwks"
	cfg.Issuers[0].Introspection = nil
	a := newAuth(t, cfg, nil, nil)
	_, err := a.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, "alice")))
	if st, _ := status(err); st != http.StatusServiceUnavailable {
		t.Fatalf("issuer down: %v (status %d), want 503", err, st)
	}
}

// TestIntrospection: an opaque token is checked with the issuer (RFC
// 7662) and held to the same audience and expiry checks.
func TestIntrospection(t *testing.T) {
	is := authntest.Start(t)
	a := newAuth(t, config(is), nil, nil)
	ctx := context.Background()
	c := is.Claims(resource, "svc-backup", "provlog.log")
	delete(c, "iss") // optional in RFC 7662: the endpoint speaks for its issuer
	is.Opaque("opaque-good", c)
	id, err := a.Authenticate(ctx, "opaque-good")
	if err != nil {
		t.Fatal(err)
	}
	if id.Auth.Via != log.AuthViaIntrospection || id.Auth.Issuer != is.URL || !strings.HasSuffix(id.Actor, ":svc-backup") {
		t.Errorf("identity %+v, auth %+v", id, id.Auth)
	}
	// An opaque token may have two dots without being a JWT.
	is.Opaque("opaque.with.dots", c)
	if id, err := a.Authenticate(ctx, "opaque.with.dots"); err != nil || id.Auth.Via != log.AuthViaIntrospection {
		t.Errorf("an opaque token with two dots: %v %v", id, err)
	}
	wrong := is.Claims("https://other.example/mcp", "svc-backup")
	is.Opaque("opaque-other-audience", wrong)
	expired := is.Claims(resource, "svc-backup")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	is.Opaque("opaque-expired", expired)
	// Other kinds of token the endpoint vouches for: a refresh token
	// (Hydra's token_use, RFC 7662's token_type) and Keycloak's ID token.
	for tok, kind := range map[string][2]string{"opaque-refresh": {"token_use", "refresh_token"},
		"opaque-refresh-type": {"token_type", "refresh_token"}, "opaque-id": {"typ", "ID"}} {
		other := is.Claims(resource, "svc-backup")
		other[kind[0]] = kind[1]
		is.Opaque(tok, other)
	}
	for _, tok := range []string{"opaque-other-audience", "opaque-expired", "opaque-unknown", "opaque-refresh", "opaque-refresh-type", "opaque-id"} {
		if _, err := a.Authenticate(ctx, tok); err == nil {
			t.Errorf("%s: accepted", tok)
		} else if st, code := status(err); st != 401 || code != "invalid_token" {
			t.Errorf("%s: %v", tok, err)
		}
	}
	// A JWT of an issuer with keys whose claims do not parse is refused
	// as that issuer's, with the reason, and sent to no introspection
	// endpoint: it was, credentials and all, and refused as "not active".
	bad := is.Claims(resource, "svc-backup")
	bad["scope"] = []string{"provlog.log"}
	before := is.Introspections()
	if _, err := a.Authenticate(ctx, is.Mint(t, bad)); err == nil || !strings.Contains(err.Error(), "scope") {
		t.Errorf("a JWT with an array scope: %v, want its claims refused", err)
	}
	if n := is.Introspections() - before; n != 0 {
		t.Errorf("a JWT with bad claims went to introspection %d times", n)
	}
	// Wrong client credentials: the endpoint refuses the sidecar, which
	// says so without accepting the token.
	cfg := config(is)
	cfg.Issuers[0].Introspection.ClientSecret = "wrong"
	b := newAuth(t, cfg, nil, nil)
	if _, err := b.Authenticate(ctx, "opaque-good"); err == nil {
		t.Error("accepted with wrong introspection credentials")
	}
}

// TestStatic: static tokens keep working beside OAuth, hold every scope
// (a reader's only the log's), and a failing request's challenge names
// the metadata.
func TestStatic(t *testing.T) {
	is := authntest.Start(t)
	static := func(tok string) (string, bool, bool) {
		switch tok {
		case "alice-token":
			return "alice", false, true
		case "reader-token":
			return "auditor", true, true
		}
		return "", false, false
	}
	a := newAuth(t, config(is), nil, static)
	id, err := a.Authenticate(context.Background(), "alice-token")
	if err != nil || id.Actor != "alice" || a.Require(id, authn.GroupLog) != nil || a.Require(id, authn.GroupTools) != nil {
		t.Errorf("static actor: %+v %v", id, err)
	}
	id, err = a.Authenticate(context.Background(), "reader-token")
	if err != nil || a.Require(id, authn.GroupLog) != nil || a.Require(id, authn.GroupTools) == nil {
		t.Errorf("reader: %+v %v", id, err)
	}
	r := httptest.NewRequest("GET", "/log/entry/1", nil)
	_, err = a.Request(r)
	if ch := a.Challenge(err); ch != `Bearer resource_metadata="https://provlog.test/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("no token: challenge %s", ch)
	}
	r.Header.Set("Authorization", "Bearer wrong")
	_, err = a.Request(r)
	if ch := a.Challenge(err); !strings.HasPrefix(ch, `Bearer resource_metadata="https://provlog.test/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="`) {
		t.Errorf("wrong token: challenge %s", ch)
	}
	// Static only (no auth:): a plain challenge.
	s := authn.Static(static)
	if _, err := s.Authenticate(context.Background(), "alice-token"); err != nil {
		t.Error(err)
	}
	_, err = s.Authenticate(context.Background(), is.Mint(t, is.Claims(resource, "alice")))
	if ch := s.Challenge(err); !strings.HasPrefix(ch, `Bearer error="invalid_token"`) {
		t.Errorf("static only: challenge %s", ch)
	}
}

// TestMetadata: the RFC 9728 document.
func TestMetadata(t *testing.T) {
	is := authntest.Start(t)
	a := newAuth(t, config(is), nil, nil)
	rec := httptest.NewRecorder()
	a.Metadata().ServeHTTP(rec, httptest.NewRequest("GET", authn.MetadataPath+"/mcp", nil))
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Scopes               []string `json:"scopes_supported"`
		Methods              []string `json:"bearer_methods_supported"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if md.Resource != resource || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != is.URL ||
		strings.Join(md.Scopes, " ") != "provlog.log provlog.tasks provlog.tools" || strings.Join(md.Methods, " ") != "header" {
		t.Errorf("metadata %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	authn.Static(nil).Metadata().ServeHTTP(rec, httptest.NewRequest("GET", authn.MetadataPath, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("static only: %d, want 404", rec.Code)
	}
}

// TestChallenger: a handler's plain 401 becomes the authenticator's
// answer: the challenge, or 403 when the token lacks the log's scope.
func TestChallenger(t *testing.T) {
	is := authntest.Start(t)
	a := newAuth(t, config(is), nil, nil)
	allowed := a.Authorizer(authn.GroupLog)
	h := a.Challenger(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "needs a reader token", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("entry"))
	}))
	for _, c := range []struct {
		name, token string
		status      int
		challenge   string
	}{
		{"no token", "", 401, `Bearer resource_metadata="`},
		{"bad token", "nope", 401, `error="invalid_token"`},
		{"no log scope", is.Mint(t, is.Claims(resource, "alice", "provlog.tools")), 403, `error="insufficient_scope", error_description="the token lacks scope provlog.log, which log need", scope="provlog.log"`},
		{"log scope", is.Mint(t, is.Claims(resource, "alice", "provlog.log")), 200, ""},
	} {
		r := httptest.NewRequest("GET", "/log/entry/1", nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		ch := rec.Header().Get("WWW-Authenticate")
		if rec.Code != c.status || !strings.Contains(ch, c.challenge) || c.challenge == "" && ch != "" {
			t.Errorf("%s: %d %q (%s), want %d with %q", c.name, rec.Code, ch, rec.Body, c.status, c.challenge)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func httptestRequest(authorization string) *http.Request {
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Authorization", authorization)
	return r
}
