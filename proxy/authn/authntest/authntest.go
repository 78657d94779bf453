// Package authntest is a small OAuth authorization server for tests of
// the sidecar's resource-server half: it serves an OpenID Connect
// discovery document, a JWKS with key rotation, and RFC 7662
// introspection, and it mints JWT access tokens (RFC 9068) with any
// claims, signed well or (for the refusal tests) badly. The same
// behaviour is tested against ORY Hydra; product code never imports it.
package authntest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// An Issuer is a running test authorization server.
type Issuer struct {
	// URL is its issuer identifier (and base URL).
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	keys    []signingKey // the first signs; all are published
	opaque  map[string]map[string]any
	fetches atomic.Int64 // JWKS fetches so far
	// introspections counts the requests to the introspection endpoint.
	introspections atomic.Int64
	// before holds the hooks Before set, by path.
	before map[string]func(*http.Request)
}

// Before makes fn run before each request to the issuer's path (such as
// "/jwks", "/introspect" or "/.well-known/openid-configuration") is
// answered: an issuer that is slow, hangs until the request is given up,
// or notes what else is going on. nil removes it.
func (is *Issuer) Before(path string, fn func(*http.Request)) {
	is.mu.Lock()
	is.before[path] = fn
	is.mu.Unlock()
}

func (is *Issuer) hook(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		fn := is.before[r.URL.Path]
		is.mu.Unlock()
		if fn != nil {
			// The body read first, so that the server notices when the
			// client gives up (and cancels r's context).
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			fn(r)
		}
		next(w, r)
	}
}

// Introspections returns how many introspection requests it got.
func (is *Issuer) Introspections() int64 { return is.introspections.Load() }

type signingKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

// Start starts an issuer with one RS256 key, stopped when t ends.
func Start(t testing.TB) *Issuer {
	is := &Issuer{opaque: map[string]map[string]any{}, before: map[string]func(*http.Request){}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.hook(is.discovery))
	mux.HandleFunc("GET /jwks", is.hook(is.jwks))
	mux.HandleFunc("POST /introspect", is.hook(is.introspect))
	is.srv = httptest.NewServer(mux)
	is.URL = is.srv.URL
	t.Cleanup(is.srv.Close)
	is.Rotate(t, jose.RS256)
	return is
}

// DiscoveryURL is the OpenID Connect discovery document's URL.
func (is *Issuer) DiscoveryURL() string { return is.URL + "/.well-known/openid-configuration" }

// JWKSURL is the key set's URL.
func (is *Issuer) JWKSURL() string { return is.URL + "/jwks" }

// IntrospectionURL is the introspection endpoint, which wants client
// "provlog" with secret "s3cret".
func (is *Issuer) IntrospectionURL() string { return is.URL + "/introspect" }

// Fetches is how often the key set has been fetched.
func (is *Issuer) Fetches() int64 { return is.fetches.Load() }

// Rotate makes a new key of alg (RS256, PS256, ES256, EdDSA) the
// signing key; the old keys stay published. It returns the new kid.
func (is *Issuer) Rotate(t testing.TB, alg jose.SignatureAlgorithm) string {
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("authntest: no keys for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	kid := fmt.Sprintf("k%d", len(is.keys)+1)
	is.keys = append([]signingKey{{kid: kid, alg: alg, priv: priv}}, is.keys...)
	return kid
}

// Withdraw stops publishing every key but the signing one.
func (is *Issuer) Withdraw() {
	is.mu.Lock()
	is.keys = is.keys[:1]
	is.mu.Unlock()
}

// Claims returns the claims of a good access token for resource, valid
// for an hour, with subject sub and the scopes given.
func (is *Issuer) Claims(resource, sub string, scopes ...string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": is.URL, "sub": sub, "aud": resource, "client_id": "agent-7",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"jti": fmt.Sprintf("jti-%d", now.UnixNano()), "scope": strings.Join(scopes, " "),
	}
}

// Mint signs claims with the current key, kid and "typ: at+jwt" in the
// header.
func (is *Issuer) Mint(t testing.TB, claims map[string]any) string {
	is.mu.Lock()
	k := is.keys[0]
	is.mu.Unlock()
	return is.MintWith(t, claims, k.alg, k.priv, k.kid)
}

// MintWith signs claims with any key (a foreign one, for the refusal
// tests) under kid.
func (is *Issuer) MintWith(t testing.TB, claims map[string]any, alg jose.SignatureAlgorithm, key any, kid string) string {
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Unsigned returns claims as a JWT with "alg: none" and no signature.
func Unsigned(claims map[string]any) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"at+jwt"}`))
	p, _ := json.Marshal(claims)
	return h + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// PublicKeyPEM returns the current key's public half in PEM, as a
// confused verifier would use it as an HMAC secret: the "HS256 signed
// with the public key" attack signs with exactly these bytes.
func (is *Issuer) PublicKeyPEM(t testing.TB) []byte {
	is.mu.Lock()
	k := is.keys[0]
	is.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Kid is the current signing key's kid.
func (is *Issuer) Kid() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys[0].kid
}

// Opaque registers an opaque token whose introspection answers claims
// (with "active": true added).
func (is *Issuer) Opaque(token string, claims map[string]any) {
	c := map[string]any{"active": true}
	for k, v := range claims {
		c[k] = v
	}
	is.mu.Lock()
	is.opaque[token] = c
	is.mu.Unlock()
}

// Revoke makes the introspection endpoint answer inactive for an opaque
// token from now on.
func (is *Issuer) Revoke(token string) {
	is.mu.Lock()
	delete(is.opaque, token)
	is.mu.Unlock()
}

func (is *Issuer) discovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"issuer": is.URL, "jwks_uri": is.JWKSURL(), "introspection_endpoint": is.IntrospectionURL(),
		"token_endpoint": is.URL + "/token", "response_types_supported": []string{"code"},
	})
}

func (is *Issuer) jwks(w http.ResponseWriter, r *http.Request) {
	is.fetches.Add(1)
	is.mu.Lock()
	var set jose.JSONWebKeySet
	for _, k := range is.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	is.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(set)
}

func (is *Issuer) introspect(w http.ResponseWriter, r *http.Request) {
	is.introspections.Add(1)
	if id, secret, ok := r.BasicAuth(); !ok || id != "provlog" || secret != "s3cret" {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	is.mu.Lock()
	c, ok := is.opaque[r.PostForm.Get("token")]
	is.mu.Unlock()
	if !ok {
		c = map[string]any{"active": false}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(c)
}

// A Bad is a token the sidecar must refuse, and how.
type Bad struct {
	Name   string
	Token  string
	Status int    // the HTTP status wanted
	Code   string // the RFC 6750 error code wanted
}

// BadTokens returns the refusal table for a sidecar whose resource is
// resource: tokens of this issuer that are expired, for another audience,
// of another issuer, unsigned (alg none), signed HS256 with the public
// key, signed by an unknown kid, tampered with after signing, and more.
// Each would be good but for its one fault (scopes included).
func (is *Issuer) BadTokens(t testing.TB, resource string, scopes ...string) []Bad {
	good := func() map[string]any { return is.Claims(resource, "alice", scopes...) }
	with := func(k string, v any) map[string]any {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	now := time.Now()
	foreign, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tampered := func() string {
		tok := is.Mint(t, good())
		parts := strings.Split(tok, ".")
		c := good()
		c["sub"] = "mallory"
		p, _ := json.Marshal(c)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(p) + "." + parts[2]
	}
	deep := map[string]any{"sub": "a"}
	for range 9 {
		deep = map[string]any{"sub": "a", "act": deep}
	}
	invalid := func(name, tok string) Bad {
		return Bad{Name: name, Token: tok, Status: http.StatusUnauthorized, Code: "invalid_token"}
	}
	return []Bad{
		invalid("expired", is.Mint(t, with("exp", now.Add(-time.Hour).Unix()))),
		invalid("expired beyond the skew", is.Mint(t, with("exp", now.Add(-2*time.Minute).Unix()))),
		invalid("not yet valid", is.Mint(t, with("nbf", now.Add(time.Hour).Unix()))),
		invalid("issued in the future", is.Mint(t, with("iat", now.Add(time.Hour).Unix()))),
		invalid("wrong audience", is.Mint(t, with("aud", "https://other.example/mcp"))),
		invalid("audience list without this resource", is.Mint(t, with("aud", []string{"https://a.example", resource + "/"}))),
		invalid("no audience", is.Mint(t, with("aud", nil))),
		invalid("wrong issuer", is.Mint(t, with("iss", "https://evil.example/"))),
		invalid("no issuer", is.Mint(t, with("iss", nil))),
		invalid("alg none", Unsigned(good())),
		invalid("HS256 signed with the public key", is.MintWith(t, good(), jose.HS256, is.PublicKeyPEM(t), is.Kid())),
		invalid("unknown kid", is.MintWith(t, good(), jose.RS256, foreign, "no-such-kid")),
		invalid("known kid, foreign key", is.MintWith(t, good(), jose.RS256, foreign, is.Kid())),
		invalid("tampered payload", tampered()),
		invalid("no exp", is.Mint(t, with("exp", nil))),
		invalid("no sub", is.Mint(t, with("sub", nil))),
		invalid("sender-constrained (cnf)", is.Mint(t, with("cnf", map[string]any{"jkt": "abc"}))),
		invalid("act chain too deep", is.Mint(t, with("act", deep))),
		invalid("act without sub", is.Mint(t, with("act", map[string]any{"client_id": "x"}))),
		invalid("exp not a number", is.Mint(t, with("exp", "tomorrow"))),
		invalid("truncated signature", truncated(is.Mint(t, good()))),
		invalid("unknown opaque token", "opaque-token-nobody-issued"),
	}
}

func truncated(tok string) string { return tok[:len(tok)-12] }
