// Package hydratest runs a real ORY Hydra v2.3.0 for tests, on loopback
// ports with an in-memory database, and gets tokens from it the way an
// agent would: client-credentials JWT access tokens (RFC 9068 shape,
// audience-bound with RFC 8707's resource), and delegated tokens for an
// agent acting for a user. Hydra's login and consent endpoints are a
// small app here with a sign-in form for [User] that grants what a
// client asks (startLogin), so a client can run the authorization code
// flow with a user agent that follows the redirects and fills in the
// form.
//
// tools/hydratest/install.sh builds the binary and prints PROVLOG_HYDRA;
// without it a test is skipped, or failed under CI=true.
//
// # Delegation, and what Hydra does not do
//
// Hydra v2.3.0 has no RFC 8693 token exchange: ory/hydra issue 1218 is
// open, fosite v0.49.0 has no handler for the grant (TestHydra checks
// Hydra refuses it), and what its v2.0 release notes and client docs
// call "Token Exchange" is the RFC 7523 JWT-bearer grant.
// So an agent acting for a user gets its token through the JWT-bearer
// grant: a party Hydra trusts for that user (here [Delegator], a key the
// test makes and registers through Hydra's trust API, standing in for a
// consent service) signs an assertion naming the user; the agent client
// presents it; Hydra checks it and issues an access token whose sub is
// the user and whose client_id is the agent. Hydra itself never writes
// an "act" claim. When a client is created with [Client.Act], the test's
// token hook (Hydra's documented oauth2.token_hook, which may add claims
// to any token) asks Hydra to add act: {sub: <the client id Hydra
// authenticated>} to that client's delegated tokens; Hydra signs it
// with its own key. The claim's content is the hook's choice, not an
// RFC 8693 exchange. A real RFC 8693 exchange, with the act claim the
// server itself writes, is tested against another server: package
// tools/zitadeltest (cmd/provlog TestOAuthTokenExchange).
//
// Test code only; nothing in the product imports it.
package hydratest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/tools/oauthtest"
)

// EnvBinary names the hydra binary install.sh built.
const EnvBinary = "PROVLOG_HYDRA"

// JWTBearerGrant is RFC 7523's grant type.
const JWTBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// Binary returns the hydra binary, skipping t when it is missing (failing
// it under CI=true, where a missing prerequisite is never a pass).
func Binary(t testing.TB) string {
	t.Helper()
	return proctest.Program(t, EnvBinary, `eval "$(bash tools/hydratest/install.sh)"`)
}

// Options change how [Start] configures Hydra.
type Options struct {
	// Opaque makes Hydra issue opaque access tokens (checked through its
	// RFC 7662 introspection endpoint) instead of JWTs.
	Opaque bool
	// Config returns more of Hydra's YAML config, given the server's
	// URLs; it is loaded after the harness's own, so its values win (the
	// README's Hydra settings, for one). With it the harness sets no
	// strategies (Opaque is ignored): Config must.
	Config func(*Server) string
}

// Server is one running Hydra.
type Server struct {
	// Issuer is the "iss" of its tokens, with Hydra's trailing slash.
	Issuer string
	// Admin is the base URL of its admin API (unauthenticated; tests only).
	Admin string
	// TokenURL is its token endpoint.
	TokenURL string
	// DiscoveryURL is its OpenID Connect discovery document.
	DiscoveryURL string
	// JWKSURL is the key set its tokens verify against.
	JWKSURL string
	// IntrospectionURL is its RFC 7662 endpoint (on the admin port).
	IntrospectionURL string

	mu    sync.Mutex
	actor map[string]bool // client ids whose delegated tokens get "act"
	hooks int             // token hook calls that asked for "act"
	// logins and consents the login app accepted, logins it refused
	logins, consents, refusedLogins int
	out                             *proctest.Buffer
	bin                             string
}

// Start runs Hydra until t ends and waits until it answers. Its signing
// keys are ES256 pairs made through the admin API before the first
// token (left to itself Hydra makes RSA-4096 keys on first use, which
// takes tens of seconds on a busy machine).
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binary(t)
	pub, adm := proctest.FreePort(t), proctest.FreePort(t)
	s := &Server{
		Issuer:           fmt.Sprintf("http://127.0.0.1:%d/", pub),
		Admin:            fmt.Sprintf("http://127.0.0.1:%d", adm),
		actor:            map[string]bool{},
		out:              &proctest.Buffer{Limit: 1 << 20},
		bin:              bin,
		IntrospectionURL: fmt.Sprintf("http://127.0.0.1:%d/admin/oauth2/introspect", adm),
	}
	s.TokenURL = s.Issuer + "oauth2/token"
	s.DiscoveryURL = s.Issuer + ".well-known/openid-configuration"
	s.JWKSURL = s.Issuer + ".well-known/jwks.json"

	hook := s.startHook(t)
	login, consent := s.startLogin(t)
	strategies := "strategies:\n  access_token: jwt\n  jwt: {scope_claim: both}\n"
	if o.Opaque {
		strategies = "strategies:\n  access_token: opaque\n"
	}
	if o.Config != nil {
		strategies = ""
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hydra.yaml")
	// secrets.system encrypts Hydra's stored keys; a fresh one per run.
	conf := fmt.Sprintf(`dsn: memory
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
urls:
  self: {issuer: %q}
  login: %q
  consent: %q
secrets:
  system: [%q]
%soauth2:
  allowed_top_level_claims: [act]
  mirror_top_level_claims: false
  token_hook: %q
sqa:
  opt_out: true
log:
  level: warn
`, pub, adm, s.Issuer, login, consent, randomString(t, 32), strategies, hook)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "all", "--dev", "--sqa-opt-out", "-c", cfg}
	if o.Config != nil {
		more := filepath.Join(dir, "more.yaml")
		if err := os.WriteFile(more, []byte(o.Config(s)), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-c", more)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting hydra: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("hydra output:\n%s", tail(s.out.String(), 6000))
		}
	})
	s.waitReady(t, exited, s.Admin+"/health/ready", s.Issuer+"health/ready")
	for _, set := range []string{"hydra.jwt.access-token", "hydra.openid.id-token"} {
		s.admin(t, http.MethodPost, "/admin/keys/"+set, map[string]string{"alg": "ES256", "use": "sig"}, nil)
	}
	return s
}

// Binary is the hydra program this server runs (its CLI talks to the
// admin and public APIs too).
func (s *Server) Binary() string { return s.bin }

// Output is what Hydra wrote to stdout and stderr so far.
func (s *Server) Output() string { return s.out.String() }

// ActHookCalls is how many times the token hook added an "act" claim.
func (s *Server) ActHookCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hooks
}

// RotateKey adds a new ES256 key to Hydra's access-token key set; Hydra
// signs new tokens with it and keeps publishing the old one.
func (s *Server) RotateKey(t testing.TB) (kid string) {
	t.Helper()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	s.admin(t, http.MethodPost, "/admin/keys/hydra.jwt.access-token", map[string]string{"alg": "ES256", "use": "sig"}, &set)
	if len(set.Keys) == 0 {
		t.Fatal("hydra made no key")
	}
	return set.Keys[0].Kid
}

// DeleteKey withdraws kid from Hydra's access-token key set: it is no
// longer published, and tokens it signed no longer verify.
func (s *Server) DeleteKey(t testing.TB, kid string) {
	t.Helper()
	s.admin(t, http.MethodDelete, "/admin/keys/hydra.jwt.access-token/"+url.PathEscape(kid), nil, nil)
}

func (s *Server) waitReady(t testing.TB, exited <-chan struct{}, urls ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, u := range urls {
		for {
			resp, err := http.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-exited:
				t.Fatalf("hydra exited before it was ready:\n%s", tail(s.out.String(), 6000))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("hydra did not answer at %s:\n%s", u, tail(s.out.String(), 6000))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// admin is adminCall, failing t on an error.
func (s *Server) admin(t testing.TB, method, path string, body, out any) {
	t.Helper()
	if err := s.adminCall(method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// Token asks the token endpoint for an access token with form f, the
// client authenticating with client_secret_post. A refusal is an error
// carrying Hydra's OAuth error.
func (s *Server) token(ctx context.Context, f url.Values) (string, error) {
	return oauthtest.Token(ctx, "hydra", s.TokenURL, "", "", f)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
