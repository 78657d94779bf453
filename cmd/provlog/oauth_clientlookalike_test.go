package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/hydratest"
)

// TestOAuthHydraPersonReadsAsClient: a person's token whose sub reads as
// the issuer's client namespace ("Client:ci-bot", "CLIENT:ci-bot", a
// Cyrillic с for the c) maps to an actor a reader, and every tool that
// compares actors as provlog's config and handoffs do (authn.Skeleton),
// takes for the client ci-bot's own, hydra:client:ci-bot: what that
// person does reads as the bot's doing. A person's sub spelled
// "client:…" exactly is refused already; its look-alikes must be too,
// with nothing written.
func TestOAuthHydraPersonReadsAsClient(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	agent := hy.CreateClient(t, hydratest.Client{ID: "helper-agent", Scopes: allScopes, Audience: []string{s.resource},
		GrantTypes: []string{hydratest.JWTBearerGrant}})
	read := func(tok string) (int, string) {
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
	// A person of an ordinary name is taken, as before.
	alice := hy.TrustDelegator(t, "alice", allScopes...)
	if code, body := read(mint(t)(hy.JWTBearer(ctx, agent, alice.Assertion(t), s.resource, allScopes...))); code != http.StatusOK {
		t.Fatalf("alice's token: %d %s", code, body)
	}
	size := s.size(t)
	taken := 0
	for _, sub := range []string{"Client:ci-bot", "CLIENT:ci-bot", "\u0441lient:ci-bot"} {
		d := hy.TrustDelegator(t, sub, allScopes...)
		tok := mint(t)(hy.JWTBearer(ctx, agent, d.Assertion(t), s.resource, allScopes...))
		code, body := read(tok)
		if code == http.StatusOK {
			taken++
			t.Errorf("a person's token with sub %q (actor hydra:%s, read as hydra:client:ci-bot) was taken", sub, sub)
		} else if code != http.StatusUnauthorized || !strings.Contains(body, "client:") {
			t.Errorf("sub %q: %d %s, want 401 naming the client namespace", sub, code, body)
		}
	}
	if taken > 0 {
		t.Logf("%d of 3 look-alike subs taken", taken)
	}
	if got := s.size(t); got != size {
		t.Errorf("log size %d -> %d", size, got)
	}
}

// TestOAuthHydraClientIDSpace: a client registered with Hydra as
// " ci-bot" (a leading space) acts as hydra:client: ci-bot, which reads
// as the client ci-bot's own hydra:client:ci-bot. A person's claim value
// with space at its start is refused ("hydra: bob"), as space the prefix
// hides; a client id's, behind "client:", must be too, with nothing
// written.
func TestOAuthHydraClientIDSpace(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	read := func(tok string) (int, string) {
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
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	if code, body := read(mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))); code != http.StatusOK {
		t.Fatalf("ci-bot's own token: %d %s", code, body)
	}
	size := s.size(t)
	spaced := hy.CreateClient(t, hydratest.Client{ID: " ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	tok := mint(t)(hy.ClientCredentials(ctx, spaced, s.resource, allScopes...))
	if code, body := read(tok); code == http.StatusOK {
		t.Errorf(`client " ci-bot"'s own token was taken, as hydra:client: ci-bot (read as hydra:client:ci-bot)`)
	} else if code != http.StatusUnauthorized || !strings.Contains(body, "space") {
		t.Errorf(`client " ci-bot": %d %s, want 401 naming the space`, code, body)
	}
	if got := s.size(t); got != size {
		t.Errorf("log size %d -> %d", size, got)
	}
}
