package main

// Probe (identity): a purge asked for by an OAuth actor is recorded
// without the token's claims.
//
// What is wrong: the README's OAuth section promises that "every entry a
// request writes names the mapped actor and, under auth, the token's
// issuer, subject, client, RFC 8693 act chain, jti and SHA-256", and
// docs/formats.md makes auth a common member of the entries an OAuth
// request wrote. POST /log/purge (purgeHandler, cmd/provlog/purge_sidecar.go)
// authenticates the OAuth token and passes only id.Actor to purge(), and
// blobs.PurgeEntry has no Auth at all: the one entry that records the
// deletion of payloads (an erasure) says "idp:dpo" but not which token,
// client or delegation chain did it, so a reader cannot check the mapping
// or tell an agent acting for the DPO from the DPO.
//
// Observed: the purge entry written by an OAuth purger has no auth member
// (e.Auth == nil), while the purge did run.
//
// Fix: give blobs.PurgeEntry an Auth (written as the common auth member),
// and have purgeHandler pass id.Auth (or log.WithAuth(r.Context(),
// id.Auth)) through purge() into it.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestProbePurgeByOAuthActorKeepsNoAuth(t *testing.T) {
	p := makePayloadLog(t)
	is := authntest.Start(t)
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`data: %s
retention: {purgers: ["idp:dpo"]}
auth:
  resource: %s
  issuers:
    - {issuer: %s, discovery_url: %s, actor_prefix: "idp:"}
`, p.data, resource, is.URL, is.DiscoveryURL()))
	base, stop := startServeAt(t, addr, "--config", cfg)
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

// TestProbePurgeNeedsNoScope: POST /log/purge checks no OAuth scope.
//
// What is wrong: with auth: scopes configured, every other protected
// request needs its group's scopes (the log API's reads need scopes.log,
// tools scopes.tools, tasks scopes.tasks), but purgeHandler only checks
// that the token's actor is listed under retention.purgers. So any token
// that maps to a purger, with no scope at all or one minted for a narrow
// purpose (an agent's delegated token for the DPO, scoped to tools),
// deletes retained payloads from the log's blob store.
//
// Observed: a token for idp:dpo carrying only provlog.tools purges a blob
// (exit 0), where a log read with the same token is refused 403
// insufficient_scope.
//
// Fix: in purgeHandler, s.authn.Require(id, authn.GroupLog) (or a purge
// scope of its own, scopes.purge) before purging; answer 403
// insufficient_scope otherwise.
func TestProbePurgeNeedsNoScope(t *testing.T) {
	p := makePayloadLog(t)
	is := authntest.Start(t)
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`data: %s
retention: {purgers: ["idp:dpo"]}
auth:
  resource: %s
  issuers:
    - {issuer: %s, discovery_url: %s, actor_prefix: "idp:"}
  scopes: {tools: [provlog.tools], tasks: [provlog.tasks], log: [provlog.log]}
`, p.data, resource, is.URL, is.DiscoveryURL()))
	base, _ := startServeAt(t, addr, "--config", cfg)
	tok := is.Mint(t, is.Claims(resource, "dpo", "provlog.tools"))
	if _, code := runCmd(t, "prove", "--log", base, "--token", tok, "--index", "0"); code == 0 {
		t.Fatalf("a log read with a tools-only token was allowed; the premise fails")
	}
	out, code := runCmd(t, "purge", "--log", base, "--token", tok, "--blob", p.bobArgs, "--reason", "tools-only token")
	if code == 0 || !blobExists(p.data, p.bobArgs) {
		t.Errorf("a token with scope provlog.tools only (no log scope) purged a blob: exit %d, blob present %v: %s", code, blobExists(p.data, p.bobArgs), strings.TrimSpace(out))
	}
}
