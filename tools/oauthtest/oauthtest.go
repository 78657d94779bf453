// Package oauthtest is the client's side of an OAuth 2.0 token endpoint
// (RFC 6749 §3.2) and of the JWTs it issues, for the tests that get
// tokens from real authorization servers (tools/hydratest,
// tools/zitadeltest, cmd/provlog's OAuth tests).
package oauthtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Token posts the token request f to tokenURL and returns the access
// token. With an id the client authenticates with HTTP Basic, its id and
// secret form-encoded first (RFC 6749 §2.3.1); without, f carries its
// credentials (client_secret_post). A refusal is an error carrying the
// server's status and OAuth error; server names the server in errors.
func Token(ctx context.Context, server, tokenURL, id, secret string, f url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(f.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s token endpoint: %w", server, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s refused the %s grant: %s: %s", server, f.Get("grant_type"), resp.Status, b)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("%s token response %s: %v", server, b, err)
	}
	return tr.AccessToken, nil
}

// Claims returns the payload of the JWT token, unverified (whoever takes
// the token checks its signature; a test reads the claims the server
// wrote), failing t when token is not a JWT.
func Claims(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
