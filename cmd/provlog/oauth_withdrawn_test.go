package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/tools/hydratest"
)

// TestOAuthHydraWithdrawnKeyCached: Hydra withdraws the key that signed
// a token the sidecar took, and the token keeps being used, no other.
// README: keys the issuer withdrew stop working once the key set is
// jwks_max_age old (2s here). The token was remembered as validated
// until its exp (Hydra's: an hour), and only a token not remembered made
// the sidecar fetch the keys again, so the one token a client (or whoever
// holds a leaked key's forgery) keeps sending stayed good.
func TestOAuthHydraWithdrawnKeyCached(t *testing.T) {
	s := startOAuthSidecarWith(t, hydratest.Options{}, func(s *oauthSidecar) string {
		return fmt.Sprintf(`auth:
  resource: %s
  issuers:
    - issuer: %s
      discovery_url: %s
      actor_prefix: "hydra:"
  scopes:
    tools: [%s]
    tasks: [%s]
    log: [%s]
  clock_skew: 1s
  jwks_min_refresh: 1s
  jwks_max_age: 2s
`, s.resource, s.hydra.Issuer, s.hydra.DiscoveryURL, scopeTools, scopeTasks, scopeLog)
	})
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	tok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))
	read := func() (int, string) {
		req, _ := http.NewRequest("GET", s.base+"/log/entry/0", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate") + " " + string(b)
	}
	if code, body := read(); code != http.StatusOK {
		t.Fatalf("the fresh token: %d %s", code, body)
	}
	hy.RotateKey(t)
	hy.DeleteKey(t, tokenKid(t, tok))
	time.Sleep(3500 * time.Millisecond) // past jwks_max_age and jwks_min_refresh
	ok := 0
	for range 3 {
		if code, _ := read(); code == http.StatusOK {
			ok++
		}
	}
	if ok > 0 {
		t.Errorf("the token of a key Hydra withdrew over jwks_max_age ago was taken %d of 3 times, want 0", ok)
	}
	code, body := read()
	if code != http.StatusUnauthorized || !strings.Contains(body, "invalid_token") {
		t.Errorf("the withdrawn key's token: %d %s, want 401 invalid_token", code, body)
	}
	if strings.Contains(s.stderr.String(), tok) {
		t.Error("the token is in the sidecar's stderr")
	}
}

// tokenKid returns the kid of a JWT's header.
func tokenKid(t *testing.T, tok string) string {
	t.Helper()
	h, _, _ := strings.Cut(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(h)
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err == nil {
		err = json.Unmarshal(b, &hdr)
	}
	if err != nil || hdr.Kid == "" {
		t.Fatalf("the token's header names no kid: %v", err)
	}
	return hdr.Kid
}
