package main

// Probe (secrets): an unauthenticated client is told the introspection
// endpoint's URL, query and all, and what it answered.
//
// What is wrong: when the introspection endpoint fails, is.introspection
// (proxy/authn/introspect.go) builds the error's Description from
// decodeAnswer's message, which names the endpoint URL as configured
// ("<url> answered 500 ..."; "cannot be reached: dial tcp 10.x.y.z:4445:
// ..."), and WriteError sends that Description to the client as the
// answer's body (and, on a 401, in WWW-Authenticate's error_description). Anyone who sends
// "Authorization: Bearer x" learns the IdP's internal admin endpoint, and
// any credential in its URL (an API gateway key in the query); the
// discovery and key-set fetch errors are built the same way. The
// sidecar's own client secret is kept out (Basic auth), the URL is not.
//
// Observed: a request with a made-up opaque token gets 503 whose body
// holds "http://127.0.0.1:N/internal/introspect?gw_key=S3cretGatewayKey
// answered 500 Internal Server Error".
//
// Fix: give the client a fixed text ("the issuer's introspection
// endpoint failed; try again later") and log the details (URL redacted:
// no userinfo, no query) for the operator only.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeIntrospectionURLToUnauthenticatedClient(t *testing.T) {
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
