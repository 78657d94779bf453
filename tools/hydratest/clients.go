package hydratest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Client is an OAuth 2.0 client registered with Hydra.
type Client struct {
	ID, Secret string
	// Scopes are the scopes it may ask for.
	Scopes []string
	// Audience are the resources (RFC 8707) it may ask tokens for.
	Audience []string
	// GrantTypes default to client_credentials.
	GrantTypes []string
	// Lifespan, when set, is how long its access tokens live (Hydra's
	// per-client lifespans, for both grants; at least a second).
	Lifespan time.Duration
	// AuthMethod is how it authenticates at the token endpoint:
	// client_secret_post (the default, what this package's grants use),
	// client_secret_basic, or none (a public client, such as a native
	// app running the authorization code flow with PKCE; it gets no
	// secret).
	AuthMethod string
	// RedirectURIs are where Hydra may send the authorization code (the
	// authorization_code grant, with response type code).
	RedirectURIs []string
	// Act makes the token hook add act: {sub: ID} to the tokens it gets
	// for someone else (the JWT-bearer grant); see the package doc.
	Act bool
}

// CreateClient registers c with Hydra (a random ID and secret when
// empty) and returns it as registered.
func (s *Server) CreateClient(t testing.TB, c Client) Client {
	t.Helper()
	if c.ID == "" {
		c.ID = "client-" + randomString(t, 8)
	}
	if c.Secret == "" && c.AuthMethod != "none" {
		c.Secret = randomString(t, 24)
	}
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{"client_credentials"}
	}
	if c.AuthMethod == "" {
		c.AuthMethod = "client_secret_post"
	}
	reg := map[string]any{
		"client_id":                  c.ID,
		"grant_types":                c.GrantTypes,
		"scope":                      strings.Join(c.Scopes, " "),
		"audience":                   c.Audience,
		"token_endpoint_auth_method": c.AuthMethod,
	}
	if c.Secret != "" {
		reg["client_secret"] = c.Secret
	}
	if len(c.RedirectURIs) > 0 {
		reg["redirect_uris"] = c.RedirectURIs
		reg["response_types"] = []string{"code"}
	}
	s.admin(t, http.MethodPost, "/admin/clients", reg, nil)
	if c.Lifespan > 0 {
		d := c.Lifespan.Round(time.Second).String()
		s.admin(t, http.MethodPut, "/admin/clients/"+url.PathEscape(c.ID)+"/lifespans", map[string]string{
			"client_credentials_grant_access_token_lifespan": d,
			"jwt_bearer_grant_access_token_lifespan":         d,
		}, nil)
	}
	if c.Act {
		s.mu.Lock()
		s.actor[c.ID] = true
		s.mu.Unlock()
	}
	return c
}

// ClientCredentials gets c an access token of its own for the resource
// audience (RFC 8707; Hydra's "audience" parameter) with scopes.
func (s *Server) ClientCredentials(ctx context.Context, c Client, audience string, scopes ...string) (string, error) {
	f := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {c.ID},
		"client_secret": {c.Secret},
		"scope":         {strings.Join(scopes, " ")},
	}
	if audience != "" {
		f.Set("audience", audience)
	}
	return s.token(ctx, f)
}

// JWTBearer gets agent an access token for the user an assertion names
// (RFC 7523), for the resource audience with scopes.
func (s *Server) JWTBearer(ctx context.Context, agent Client, assertion, audience string, scopes ...string) (string, error) {
	return s.token(ctx, url.Values{
		"grant_type":    {JWTBearerGrant},
		"assertion":     {assertion},
		"client_id":     {agent.ID},
		"client_secret": {agent.Secret},
		"scope":         {strings.Join(scopes, " ")},
		"audience":      {audience},
	})
}

// A Delegator is a party Hydra trusts to vouch for one user (RFC 7523
// assertions): in a deployment, the service that recorded the user's
// consent to an agent; here a key the test made. Its assertions are
// signed locally; the access tokens Hydra issues for them are Hydra's.
type Delegator struct {
	Issuer, Subject string
	tokenURL        string
	key             jose.JSONWebKey
}

// TrustDelegator makes a key and registers it with Hydra as an issuer of
// assertions for subject, allowed scopes.
func (s *Server) TrustDelegator(t testing.TB, subject string, scopes ...string) *Delegator {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := &Delegator{
		Issuer:   "https://consent.test/" + randomString(t, 6),
		Subject:  subject,
		tokenURL: s.TokenURL,
		key:      jose.JSONWebKey{Key: priv, KeyID: "consent-" + randomString(t, 6), Algorithm: string(jose.ES256), Use: "sig"},
	}
	s.admin(t, http.MethodPost, "/admin/trust/grants/jwt-bearer/issuers", map[string]any{
		"issuer":     d.Issuer,
		"subject":    subject,
		"scope":      scopes,
		"jwk":        d.key.Public(),
		"expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
	}, nil)
	return d
}

// Assertion is a fresh assertion for the delegator's subject, good for
// five minutes at Hydra's token endpoint.
func (d *Delegator) Assertion(t testing.TB) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: d.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer:   d.Issuer,
		Subject:  d.Subject,
		Audience: jwt.Audience{d.tokenURL},
		Expiry:   jwt.NewNumericDate(now.Add(5 * time.Minute)),
		IssuedAt: jwt.NewNumericDate(now),
		ID:       randomString(t, 16),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hookRequest is the part of Hydra's token hook body the hook reads.
type hookRequest struct {
	Request struct {
		ClientID   string   `json:"client_id"`
		GrantTypes []string `json:"grant_types"`
	} `json:"request"`
}

// startHook serves Hydra's token hook on a loopback port until t ends
// and returns its URL. For a client made with Act, a token Hydra issues
// through the JWT-bearer grant gets act: {sub: the client id}; every
// other token passes unchanged (204).
func (s *Server) startHook(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hr hookRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&hr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		act := s.actor[hr.Request.ClientID] && slices.Contains(hr.Request.GrantTypes, JWTBearerGrant)
		if act {
			s.hooks++
		}
		s.mu.Unlock()
		if !act {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"session": map[string]any{
			"access_token": map[string]any{"act": map[string]any{"sub": hr.Request.ClientID}},
		}})
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/hook"
}

func randomString(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}
