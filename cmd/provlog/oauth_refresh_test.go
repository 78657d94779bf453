package main

// A refresh token is refused as a bearer token (OAuth with a real Hydra).
// An introspection endpoint answers active for refresh tokens too (RFC
// 7662 §2.1: token_type_hint is only a hint), with the grant's audience
// and the refresh token's own, far later, exp; Hydra says which kind it is
// in token_use. Accepted, a refresh token, which a client only ever sends
// to the authorization server, would act as the person for as long as it
// lives, and entries would name it an access token.
//
// Run with PROVLOG_HYDRA and PROVLOG_MCPTEST_DIR set as the other Hydra
// tests are (tools/hydratest/install.sh).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/hydratest"
)

func TestOAuthHydraRefreshTokenRefused(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "introspect.secret")
	if err := os.WriteFile(secret, []byte("not checked by Hydra's admin port\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startOAuthSidecarWith(t, hydratest.Options{Opaque: true}, func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      actor_prefix: "hydra:"
      introspection:
        url: %s
        client_id: provlog
        client_secret_file: %s
  scopes: {tools: [%s], tasks: [%s], log: [%s]}
`, s.resource, s.hydra.Issuer, s.hydra.IntrospectionURL, secret, scopeTools, scopeTasks, scopeLog)
	})
	hy := s.hydra

	// A confidential web client that runs the authorization code flow for
	// alice and may keep a refresh token (offline_access).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	redirect := "http://" + l.Addr().String() + "/cb"
	scopes := append([]string{"offline_access"}, allScopes...)
	c := hy.CreateClient(t, hydratest.Client{ID: "web-app", Scopes: scopes, Audience: []string{s.resource},
		GrantTypes: []string{"authorization_code", "refresh_token"}, RedirectURIs: []string{redirect}})

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"client_id": {c.ID}, "response_type": {"code"}, "redirect_uri": {redirect},
		"scope": {strings.Join(scopes, " ")}, "state": {"refresh-state-123"}, "audience": {s.resource}}
	resp, err := browser.Get(strings.TrimSuffix(hy.Issuer, "/") + "/oauth2/auth?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	loginURL := resp.Request.URL
	ch := loginURL.Query().Get("login_challenge")
	if ch == "" {
		t.Fatalf("no login page: %s %s\n%s", resp.Status, loginURL, body)
	}
	post := *loginURL
	post.RawQuery = ""
	resp, err = browser.PostForm(post.String(), url.Values{"login_challenge": {ch}, "username": {hydratest.User}, "password": {hydratest.Password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := resp.Location()
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %s %v", resp.Status, loc)
	}
	f := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirect},
		"client_id": {c.ID}, "client_secret": {c.Secret}}
	resp, err = http.PostForm(hy.TokenURL, f)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &tr); err != nil || tr.AccessToken == "" || tr.RefreshToken == "" {
		t.Fatalf("token endpoint: %s %s", resp.Status, b)
	}

	// The access token works, as it should.
	cs := connectHTTP(t, s.base, tr.AccessToken)
	callTool(t, cs, "everything__echo", map[string]any{"message": "with the access token"})
	cs.Close()

	// The refresh token must not.
	req, _ := http.NewRequest(http.MethodPost, s.resource, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"rt","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+tr.RefreshToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("alice's refresh token, presented as a bearer token, was answered %s (want 401 invalid_token)", resp.Status)
		cs := connectHTTP(t, s.base, tr.RefreshToken)
		res, err := cs.CallTool(context.Background(), toolParams("everything__echo", map[string]any{"message": "with the refresh token"}))
		cs.Close()
		if err == nil && !res.IsError {
			t.Errorf("and a tool call made with the refresh token went through")
		}
		s.stop()
		for _, e := range readAll(t, s.data) {
			if args, _ := e["args"].(map[string]any); e["kind"] == "call" && args["message"] == "with the refresh token" {
				t.Errorf("its call entry names actor %v, auth %v", e["actor"], e["auth"])
			}
		}
	}
}
