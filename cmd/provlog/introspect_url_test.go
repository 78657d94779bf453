package main

// An unauthenticated client whose token the introspection endpoint
// could not check is told so in fixed words, never the endpoint's URL
// (the IdP's internal admin address, and any credential in its query) or
// what it answered: those go to the operator's log, the URL redacted.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestIntrospectionURLNotToClient(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream unavailable", http.StatusInternalServerError)
	}))
	defer idp.Close()
	const secret = "S3cretGatewayKey"
	addr := freeAddr(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`data: data
auth:
  resource: http://%s/mcp
  issuers:
    - issuer: https://idp.internal.example
      actor_prefix: "idp:"
      introspection: {url: "%s/internal/introspect?gw_key=%s", client_id: provlog}
`, addr, idp.URL, secret))
	base, _ := startServeAt(t, addr, "--config", cfg)
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer made-up-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(b) + resp.Header.Get("WWW-Authenticate"); strings.Contains(got, secret) || strings.Contains(got, "/internal/introspect") {
		t.Errorf("an unauthenticated request was answered %s with the introspection endpoint's URL: body %q, WWW-Authenticate %q",
			resp.Status, strings.TrimSpace(string(b)), resp.Header.Get("WWW-Authenticate"))
	}
}
