package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionShare: one actor holds at most its share of the stateful
// sessions (by default a quarter of MaxSessions), so another actor still
// gets one. An initialize beyond the share gets 503 naming
// sessions.per_actor, and a session that ends makes room for its actor
// again. The cap was global: alice opened all MaxSessions of them, and
// bob's initialize got 503 until the idle limit closed hers.
func TestSessionShare(t *testing.T) {
	p := startProxy(t, newTestLog(t), nil, func(o *Options) { o.MaxSessions = 8 })
	front := serveTokens(t, p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	initialize := func(token string) (*http.Response, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		return postMCP(t, front, body, map[string]string{"Authorization": "Bearer " + token})
	}
	var opened []string
	var refused string
	for range 8 { // all of MaxSessions, if she may
		resp, b := initialize(testToken)
		switch resp.StatusCode {
		case http.StatusOK:
			opened = append(opened, resp.Header.Get("Mcp-Session-Id"))
		case http.StatusServiceUnavailable:
			refused = b
		default:
			t.Fatalf("alice's initialize: %d %s", resp.StatusCode, b)
		}
	}
	if len(opened) != 2 {
		t.Errorf("alice opened %d sessions of 8, want her share, 2", len(opened))
	}
	for _, want := range []string{`too many sessions for actor \"alice\"`, "sessions.per_actor 2 of sessions.max 8", "close one of its sessions (DELETE)"} {
		if !strings.Contains(refused, want) {
			t.Errorf("alice's initialize beyond her share: %s, want it to say %q", refused, want)
		}
	}
	// Bob is served: a real client's session, and a call on it.
	bob := connectHTTPAs(t, front, "bobs-token", "2025-11-25", nil)
	if _, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "provlog__status"}); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
	// Alice closes one of hers, which makes room for her again.
	req, _ := http.NewRequest(http.MethodDelete, front, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", opened[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "alice's closed session to leave her share", func() bool {
		p.sessionsMu.Lock()
		defer p.sessionsMu.Unlock()
		return p.sessionShares[testActor] == 1
	})
	if resp, b := initialize(testToken); resp.StatusCode != http.StatusOK {
		t.Errorf("alice's initialize after she closed one: %d %s", resp.StatusCode, b)
	}
}

// TestParkedShare: one actor's calls parked at once are at most its share
// of MaxParkedCalls; beyond it the server's request is refused (the call
// goes on to the server's answer to that), naming parking.per_actor, while
// another actor's call still parks. The cap was global: alice's calls
// took every place, and bob's server request was refused.
func TestParkedShare(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx"), askingFixture(t, "fy"), askingFixture(t, "fz")}, func(o *Options) {
		o.MaxParkedCalls = 2 // alice's share: a quarter, at least 1
	})
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	dir := t.TempDir()
	ctx := context.Background()
	parkedRound(t, alice, map[string]any{"path": filepath.Join(dir, "a")})
	// Other servers, so that their requests cannot be taken for the first call's.
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "fy__ask_twice", Arguments: map[string]any{"path": filepath.Join(dir, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput() || !res.IsError || !strings.Contains(textOf(res), "wait for its input already (its share, the sidecar's parking.per_actor 1 of parking.max 2)") {
		t.Errorf("alice's call beyond her share: %s", mustJSON(res))
	}
	res, err = bob.CallTool(ctx, &mcp.CallToolParams{Name: "fz__ask_twice", Arguments: map[string]any{"path": filepath.Join(dir, "c")}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Errorf("bob's call, with alice at her share: %s, want it parked", mustJSON(res))
	}
	if _, n := p.parked.size(); n != 2 {
		t.Errorf("%d calls parked, want alice's and bob's", n)
	}
}

// TestSubscriptionCaps: a session holds at most SubscriptionsPerSession
// resource subscriptions, an actor SubscriptionsPerActor and the front
// MaxSubscriptions; one beyond them is refused naming the cap, and
// nothing is subscribed downstream. A URI already held counts once, an
// unsubscribe makes room, and sessions that end give their share back.
// A subscriptions/listen of more URIs than fit is refused whole, before
// any is subscribed. There was no cap: a client subscribed to any number
// of URIs of a server that takes any, each held downstream.
func TestSubscriptionCaps(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv], cfg.Protocol = "subs", "2025-11-25"
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) {
		o.MaxSubscriptions, o.SubscriptionsPerActor, o.SubscriptionsPerSession = 4, 3, 2
	})
	front := serveTokens(t, p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	waitRouted(t, p, "fx__touch")
	ctx := context.Background()
	a1 := connectHTTPAs(t, front, testToken, "2025-11-25", nil)
	a2 := connectHTTPAs(t, front, testToken, "2025-11-25", nil)
	b1 := connectHTTPAs(t, front, "bobs-token", "2025-11-25", nil)
	downstream := func() string { // the subscriptions the server took
		t.Helper()
		res, err := b1.CallTool(ctx, &mcp.CallToolParams{Name: "fx__touch"})
		if err != nil || res.IsError {
			t.Fatalf("touch: %v %s", err, mustJSON(res))
		}
		_, n, _ := strings.Cut(textOf(res), "taken: ")
		return n
	}
	uri := func(i int) string { return fmt.Sprintf("fx+fixture:///r%d", i) }
	subscribe := func(who string, cs *mcp.ClientSession, i int, refusal string) {
		t.Helper()
		err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(i)})
		switch {
		case refusal == "" && err != nil:
			t.Errorf("%s subscribing to %s: %v", who, uri(i), err)
		case refusal != "" && (err == nil || !strings.Contains(err.Error(), refusal)):
			t.Errorf("%s subscribing to %s: %v, want a refusal naming %s", who, uri(i), err, refusal)
		}
	}
	subscribe("alice's first session", a1, 1, "")
	subscribe("alice's first session", a1, 2, "")
	subscribe("alice's first session, again", a1, 1, "")
	subscribe("alice's first session, a third URI", a1, 3, "subscriptions.per_session (2)")
	subscribe("alice's second session", a2, 3, "")
	subscribe("alice's second session, a fourth of hers", a2, 4, "subscriptions.per_actor 3 of subscriptions.max 4")
	subscribe("bob", b1, 4, "")
	subscribe("bob, a fifth in all", b1, 5, "subscriptions.max (4)")
	if got := downstream(); got != "4" {
		t.Errorf("the server took %s subscriptions, want 4: none refused reached it", got)
	}

	// A listen of three URIs where two would fit: refused whole.
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` +
		uri(6) + `","` + uri(7) + `","` + uri(8) + `"]}` + statelessMeta + `}}`
	h := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Protocol-Version": statelessProtocol, "Mcp-Method": methodListen}
	must(t, a1.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri(1)}))
	must(t, b1.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri(4)}))
	answer := make(chan string, 1)
	listenCtx, stop := context.WithCancel(ctx)
	defer stop() // a listen that was taken runs until then
	go func() { answer <- postListen(listenCtx, front, body, h) }()
	var got string
	waitFor(t, "the listen to be answered or subscribed", func() bool {
		select {
		case got = <-answer:
			return true
		default:
			return downstream() != "4"
		}
	})
	if !strings.Contains(got, "would hold 3 resource subscriptions, over the sidecar's subscriptions.per_session (2)") {
		t.Errorf("a listen of more URIs than a session holds: %q, want a refusal naming subscriptions.per_session", got)
	}
	if n := downstream(); n != "4" {
		t.Errorf("the server took %s subscriptions after the refused listen, want 4", n)
	}

	// Room again: an unsubscribe, and sessions that end.
	subscribe("alice's first session, after an unsubscribe", a1, 5, "")
	a1.Close()
	a2.Close()
	b1.Close()
	waitFor(t, "the ended sessions to give their subscriptions back", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.nsubs == 0 && len(p.subsOf) == 0
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// postListen POSTs a subscriptions/listen and returns the answer, or what
// of it came before ctx ended the request.
func postListen(ctx context.Context, url, body string, header map[string]string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSessionOpenedAfterAnother: an actor one session short of its share
// opens another at once after the last, as a client opening its sessions
// one after the other does. The request that opened the last held a place
// among the actor's sessions until its handler returned, which may be
// after the client has its answer, and the session counted too: for that
// moment one session was counted twice, and the next initialize was
// refused (TestSessionCapAndIdle failed so, 1 run in 12 on a busy
// machine). Each round opens two sessions with a share of two, one after
// the other, then closes them.
func TestSessionOpenedAfterAnother(t *testing.T) {
	p := startProxy(t, newTestLog(t), nil, func(o *Options) {
		o.MaxSessions = 64
		o.SessionsPerActor = 2
	})
	front := serveHTTP(t, p)
	held := func() int {
		p.sessionsMu.Lock()
		defer p.sessionsMu.Unlock()
		return p.sessionShares[testActor]
	}
	for round := range 40 {
		a := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		b := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		a.Close()
		b.Close()
		// The sessions end on their own goroutines; a liveness bound.
		for deadline := time.Now().Add(10 * time.Second); held() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the actor still holds %d sessions after closing both", round, held())
			}
		}
	}
}
