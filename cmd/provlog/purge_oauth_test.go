package main

// A purge an OAuth actor asks for (POST /log/purge) is recorded with the
// token's claims under auth, as every entry an OAuth request writes is:
// the one entry that records an erasure says which token, client and
// delegation did it, not only the mapped actor.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestPurgeByOAuthActorKeepsAuth(t *testing.T) {
	p, is, resource, base, stop := oauthPurger(t, "")
	tok := is.Mint(t, is.Claims(resource, "dpo"))
	out, code := runCmd(t, "purge", "--log", base, "--token", tok, "--blob", p.bobArgs, "--reason", "erasure request #7")
	if code != 0 || blobExists(p.data, p.bobArgs) {
		t.Fatalf("purge --log by the OAuth purger: %d %s", code, out)
	}
	stop()
	s, err := openStore(p.data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.State(context.Background())
	es, _ := s.Entries(context.Background(), 0, st.Size)
	s.Close()
	found := false
	for _, b := range es {
		e, _ := log.ParseEntry(b)
		if e == nil || e.Kind != blobs.KindPurge || e.Actor != "idp:dpo" {
			continue
		}
		found = true
		if e.Auth == nil || e.Auth.Subject != "dpo" || e.Auth.Issuer != is.URL {
			t.Errorf("the purge entry of OAuth actor idp:dpo carries auth %+v, want the token's claims (iss %s, sub dpo): %s", e.Auth, is.URL, b)
		}
	}
	if !found {
		t.Fatalf("no purge entry by idp:dpo in the log")
	}
}

// TestPurgeNeedsLogScope: POST /log/purge holds an OAuth token to the
// log's scopes, as the log API's reads are, besides its actor being a
// purger: a token for idp:dpo carrying only provlog.tools purges nothing.
func TestPurgeNeedsLogScope(t *testing.T) {
	p, is, resource, base, _ := oauthPurger(t, "  scopes: {tools: [provlog.tools], tasks: [provlog.tasks], log: [provlog.log]}\n")
	tok := is.Mint(t, is.Claims(resource, "dpo", "provlog.tools"))
	if _, code := runCmd(t, "prove", "--log", base, "--token", tok, "--index", "0"); code == 0 {
		t.Fatalf("a log read with a tools-only token was allowed; the premise fails")
	}
	out, code := runCmd(t, "purge", "--log", base, "--token", tok, "--blob", p.bobArgs, "--reason", "tools-only token")
	if code == 0 || !blobExists(p.data, p.bobArgs) {
		t.Errorf("a token with scope provlog.tools only (no log scope) purged a blob: exit %d, blob present %v: %s", code, blobExists(p.data, p.bobArgs), strings.TrimSpace(out))
	}
}

// oauthPurger serves a payload log whose config takes tokens of an
// in-process issuer as idp: actors, idp:dpo a purger, with more (auth:
// lines) added. It returns the log, the issuer, the resource its tokens
// name, and the sidecar's address and stop.
func oauthPurger(t *testing.T, more string) (p *payloadLog, is *authntest.Issuer, resource, base string, stop func()) {
	t.Helper()
	p = makePayloadLog(t)
	is = authntest.Start(t)
	addr := freeAddr(t)
	resource = "http://" + addr + "/mcp"
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf("data: %s\nretention: {purgers: [\"idp:dpo\"]}\nauth:\n  resource: %s\n  issuers:\n    - {issuer: %s, discovery_url: %s, actor_prefix: \"idp:\"}\n%s",
		p.data, resource, is.URL, is.DiscoveryURL(), more))
	base, stop = startServeAt(t, addr, "--config", cfg)
	return p, is, resource, base, stop
}
