package main

import (
	"context"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/hydratest"
)

// TestOAuthHydraOfferToUnmappable: a task may be offered or handed off to
// an issuer's actor who has not called yet (the id begins with its
// actor_prefix). But an id no token of the issuer maps to, though it
// begins with the prefix (hydra:Client:ci-bot, hydra:сlient:ci-bot with a
// Cyrillic с, hydra: bob, hydra:client: ci-bot), names nobody who could
// ever accept the task, and reads as an actor who could: the client
// ci-bot, or bob. Such offers are refused, nothing written; one to the
// person hydra:bob is taken as before.
func TestOAuthHydraOfferToUnmappable(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	cs := connectHTTP(t, s.base, mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...)))
	defer cs.Close()
	if _, _, err := toolCall(cs, "create_task", map[string]any{"title": "for bob", "offer_to": "hydra:bob"}); err != nil {
		t.Fatalf("offer to hydra:bob: %v", err)
	}
	size := s.size(t)
	taken := 0
	for _, to := range []string{"hydra:Client:ci-bot", "hydra:\u0441lient:ci-bot", "hydra: bob", "hydra:client: ci-bot", "HYDRA:bob"} {
		if _, _, err := toolCall(cs, "create_task", map[string]any{"title": "x", "offer_to": to}); err == nil {
			taken++
			t.Errorf("create_task offered to %q, which no Hydra token maps to: written", to)
		} else if !strings.Contains(err.Error(), to) {
			t.Errorf("offer to %q: %v (does not name it)", to, err)
		}
	}
	t.Logf("offers to ids no token maps to taken: %d of 5", taken)
	if got := s.size(t); got != size {
		t.Errorf("log size %d -> %d", size, got)
	}
}
