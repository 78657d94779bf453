// Package zitadeltest runs a real RFC 8693 token-exchange server for
// tests: the zitadel/oidc v3.52.0 library's example OpenID Provider (its
// op package, with the example's in-memory storage), built from
// tools/zitadeltest/server by install.sh, on a loopback port it picks
// itself.
//
// ORY Hydra v2.3.0 (tools/hydratest) has no token-exchange grant; this
// server has one, and its example storage writes the "act" claim
// RFC 8693 §4.1 defines: when a party allowed to act for others (an
// admin user in the example's user store) presents its own token as the
// subject_token and asks for scope "custom_scope:impersonate:<user>",
// the token it gets has sub <user> and act {sub: <that party>}, with
// client_id the client that made the exchange. The example never
// chains an act claim it received into a new one, and the library itself
// writes no act, so its act is one level deep (TestExchangeActIsOneLevel
// names the code and fails when that changes).
//
// The users: [Agent] is the example's service user "sid1" (its id and
// secret are fixed in the example's storage), made an admin through the
// users file, so it may act for others; [User] is alice. [Client] is the
// web client that runs the exchange.
//
// Test code only; nothing in the product imports it.
package zitadeltest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/tools/oauthtest"
)

// EnvBinary names the server binary install.sh built.
const EnvBinary = "PROVLOG_ZITADEL_OP"

// The example's identities (see the package doc).
const (
	Agent       = "sid1"       // the example's service user
	agentSecret = "verysecret" // its secret, fixed in the example's storage
	User        = "alice"
	Client      = "agent-app"
)

// TokenExchangeGrant is RFC 8693's grant type.
const TokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"

const accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

// Server is one running example OP.
type Server struct {
	// Issuer is the "iss" of its tokens, with a trailing slash.
	Issuer string
	// DiscoveryURL is its OpenID Connect discovery document.
	DiscoveryURL string
	// TokenURL is its token endpoint.
	TokenURL string

	secret string // Client's
	out    *proctest.Buffer
}

// Binary returns the server binary, skipping t when it is missing
// (failing it under CI=true, where a missing prerequisite is never a
// pass).
func Binary(t testing.TB) string {
	t.Helper()
	return proctest.Program(t, EnvBinary, `eval "$(bash tools/zitadeltest/install.sh)"`)
}

// Start runs the server until t ends and waits until it answers.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	b := make([]byte, 16)
	rand.Read(b)
	s := &Server{secret: hex.EncodeToString(b), out: &proctest.Buffer{Limit: 1 << 20}}
	users := map[string]any{
		Agent: map[string]any{"ID": Agent, "Username": "review-agent", "IsAdmin": true, "PreferredLanguage": "en"},
		User: map[string]any{"ID": User, "Username": User, "Email": "alice@example.org", "EmailVerified": true,
			"PreferredLanguage": "en"},
	}
	file := filepath.Join(t.TempDir(), "users.json")
	if j, err := json.Marshal(users); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(file, j, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-users", file, "-client", Client+":"+s.secret)
	cmd.Stderr = s.out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the zitadel example OP: %v", err)
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		io.Copy(s.out, r)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("zitadel example OP output:\n%s", s.out.String())
		}
	})
	select {
	case line := <-first:
		iss, ok := strings.CutPrefix(strings.TrimSpace(line), "issuer ")
		if !ok {
			t.Fatalf("the zitadel example OP said %q, not its issuer:\n%s", line, s.out.String())
		}
		s.Issuer = iss
	case <-time.After(60 * time.Second):
		t.Fatalf("the zitadel example OP did not start:\n%s", s.out.String())
	}
	s.DiscoveryURL = s.Issuer + ".well-known/openid-configuration"
	resp, err := http.Get(s.DiscoveryURL)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	defer resp.Body.Close()
	var d struct {
		TokenEndpoint string   `json:"token_endpoint"`
		Grants        []string `json:"grant_types_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %s: %v", resp.Status, err)
	}
	s.TokenURL = d.TokenEndpoint
	return s
}

// AgentToken is the agent's own access token (client credentials, an
// opaque token only the server reads).
func (s *Server) AgentToken(ctx context.Context) (string, error) {
	return s.token(ctx, Agent, agentSecret, url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}})
}

// Exchange trades the agent's token for one to act for user at
// audience: RFC 8693 token exchange by [Client], with the example's
// impersonation scope. The token it returns is a JWT.
func (s *Server) Exchange(ctx context.Context, agentToken, user, audience string) (string, error) {
	return s.token(ctx, Client, s.secret, url.Values{
		"grant_type":           {TokenExchangeGrant},
		"subject_token":        {agentToken},
		"subject_token_type":   {accessTokenType},
		"requested_token_type": {accessTokenType},
		"scope":                {"openid custom_scope:impersonate:" + user},
		"audience":             {audience},
	})
}

// token asks the token endpoint for an access token, the client
// authenticating with HTTP Basic. A refusal is an error carrying the
// server's OAuth error.
func (s *Server) token(ctx context.Context, id, secret string, f url.Values) (string, error) {
	return oauthtest.Token(ctx, "the zitadel/oidc example OP", s.TokenURL, id, secret, f)
}
