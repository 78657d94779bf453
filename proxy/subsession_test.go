package proxy

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSubscriptionsAreTheSessions: a resource subscription is its front
// session's. An unsubscribe from a session that never subscribed (another
// actor's) leaves the others' subscription held downstream: its client
// still hears of changes. A session that subscribes twice counts once, so
// its one unsubscribe ends the downstream subscription; and a session
// that ends gives up what it held. Counted per request, bob's unsubscribe
// ended alice's subscription downstream, and she heard of no change
// again; and a session that ended subscribed held its URIs for good.
func TestSubscriptionsAreTheSessions(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv], cfg.Protocol = "subs", "2025-11-25"
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	front := serveTokens(t, p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	waitRouted(t, p, "fx__touch")
	const uri = "fx+fixture:///watched"
	ctx := context.Background()
	held := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.subs[uri]
	}
	cl := newClientLog()
	alice := connectHTTPAs(t, front, testToken, "2025-11-25", cl)
	bob := connectHTTPAs(t, front, "bobs-token", "2025-11-25", nil)
	touch := func(what string) {
		t.Helper()
		if res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "fx__touch"}); err != nil || res.IsError {
			t.Fatalf("touch: %v %s", err, mustJSON(res))
		}
		cl.waitUpdated(t, uri, what)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(alice.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	touch("alice's subscription")
	must(bob.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}))
	if got := held(); got != 1 {
		t.Errorf("after bob's unsubscribe from what he never subscribed to, %d sessions hold %s, want alice's 1", got, uri)
	}
	touch("alice's subscription after bob's unsubscribe")

	must(alice.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	must(alice.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}))
	if got := held(); got != 0 {
		t.Errorf("after alice subscribed twice and unsubscribed, %d sessions hold %s, want 0", got, uri)
	}

	must(alice.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	must(bob.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	bob.Close()
	waitFor(t, "bob's ended session to give up its subscription", func() bool { return held() == 1 })
	touch("alice's subscription after bob's session ended")
	alice.Close()
	waitFor(t, "alice's ended session to give up its subscription", func() bool { return held() == 0 })
}
