package main

// Probe (identity, OAuth with a real Hydra): a client's own token and a
// person's token map to one actor when the client's id is the person's
// subject.
//
// What is wrong: the actor of an OAuth token is actor_prefix + sub
// (proxy/authn/jwt.go, identity), whatever kind of party sub names. In a
// client-credentials token sub is the client id (Hydra, and most
// authorization servers), in a delegated or user token it is the person.
// So a client registered as "alice" (a bot, an agent, anything the IdP
// admins named so) acts as hydra:alice, the very actor the person alice's
// tokens map to: it accepts a task handed off to the person, owns it, and
// can report its completion, and the log names "hydra:alice" for both. RFC
// 9068 §5 warns of exactly this collision (a client-credentials token
// whose sub is a resource owner's). The README presents the two mappings
// side by side ("a client's own token acts as hydra:<client id>"; a
// delegated token's "entries name hydra:alice") without saying they share
// one namespace.
//
// Run with PROVLOG_HYDRA and PROVLOG_MCPTEST_DIR set as the other Hydra
// tests are (tools/hydratest/install.sh).
//
// Observed: the client "alice" (client_credentials, no person involved)
// accepts the task reserved for hydra:alice and becomes its owner.
//
// Fix: tell the two apart when mapping: a token whose sub equals its
// client_id/azp (and carries no act) is the client's own and maps to a
// namespace of clients (e.g. actor_prefix + "client:" + id, or a
// configurable client_prefix); or refuse such a token when a person
// namespace is configured. Handoffs then name one or the other.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/provlog/provlog/tools/hydratest"
)

func TestProbeHydraClientActsAsPersonOfSameName(t *testing.T) {
	s := startOAuthSidecar(t)
	hy, ctx := s.hydra, context.Background()
	bot := hy.CreateClient(t, hydratest.Client{ID: "ci-bot", Scopes: allScopes, Audience: []string{s.resource}})
	botTok := mint(t)(hy.ClientCredentials(ctx, bot, s.resource, allScopes...))

	// The bot hands a task to the person alice (her delegated tokens map
	// to hydra:alice, TestOAuthHydraHandoff).
	cs := connectHTTP(t, s.base, botTok)
	created, _ := callTool(t, cs, "create_task", map[string]any{"title": "approve the payroll run"})
	id, _ := created["task_id"].(string)
	callTool(t, cs, "accept_task", map[string]any{"task_id": id})
	callTool(t, cs, "handoff_task", map[string]any{"task_id": id, "to": "hydra:alice"})
	cs.Close()

	// A client that happens to be called "alice", with no person behind
	// its token.
	client := hy.CreateClient(t, hydratest.Client{ID: "alice", Scopes: allScopes, Audience: []string{s.resource}})
	clientTok := mint(t)(hy.ClientCredentials(ctx, client, s.resource, allScopes...))
	cs = connectHTTP(t, s.base, clientTok)
	res, err := cs.CallTool(ctx, toolParams("accept_task", map[string]any{"task_id": id}))
	cs.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if strings.Contains(string(b), `"owner":"hydra:alice"`) {
			t.Errorf("the client %q's own client-credentials token accepted the task handed to the person hydra:alice and owns it as her: %s", client.ID, b)
		} else {
			t.Errorf("the client's accept of alice's task was not refused: %s", b)
		}
	}
}
