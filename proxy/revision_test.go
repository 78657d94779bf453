package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClientCapabilitiesReachStdioServer: a stdio server is spoken to in
// 2025-11-25 on a session the proxy opened with its own capabilities
// (sampling and elicitation), but a 2026-07-28 client's call carries the
// client's capabilities to it, and the server judges those. Before, the
// conformance suite's test_missing_capability ran through provlog for a
// client that declared no sampling, where the server directly refuses it
// with -32021 and HTTP 400 (server-stateless).
func TestClientCapabilitiesReachStdioServer(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, nil)
	front := serveHTTP(t, p)
	call := func(caps string) (int, string) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"go__test_missing_capability","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
		req, _ := http.NewRequest("POST", front, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "go__test_missing_capability")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(`{}`); code != http.StatusBadRequest || !strings.Contains(body, `"code":-32021`) {
		t.Errorf("a client without sampling: HTTP %d %s, want 400 and -32021", code, body)
	}
	if code, body := call(`{"sampling":{}}`); code != http.StatusOK || !strings.Contains(body, "Client declared the sampling capability") {
		t.Errorf("a client with sampling: HTTP %d %s, want the tool's result", code, body)
	}
}

// TestCallTargetResolvedOnce: the session a call goes to is resolved once,
// when its call entry is made (which names that session's definition), and
// the call is forwarded to that same session even if the server's session
// changed in between (a restart, or a newer process coming up); a leg
// copied from the call keeps it. It was resolved again to forward.
func TestCallTargetResolvedOnce(t *testing.T) {
	first, second := new(mcp.ClientSession), new(mcp.ClientSession)
	d := &downstream{sup: &supervisor{id: "s", cs: first}, cfg: ServerConfig{ID: "s", URL: "http://127.0.0.1:1/mcp"}}
	in := &callIn{d: d, protocol: statelessProtocol}
	ctx := context.Background()
	if cs, err := in.target(ctx); cs != first || err != nil {
		t.Fatalf("target: %p, %v; want the first session %p", cs, err, first)
	}
	d.sup.mu.Lock()
	d.sup.cs = second
	d.sup.mu.Unlock()
	if cs, _ := in.target(ctx); cs != first {
		t.Errorf("after the server's session changed, the call went to %p, not %p, the session its entry was made against", cs, first)
	}
	leg := *in
	if cs, _ := leg.target(ctx); cs != first {
		t.Errorf("a leg copied from the call went to %p, not %p", cs, first)
	}
	if cs, _ := (&callIn{d: d, protocol: statelessProtocol}).target(ctx); cs != second {
		t.Errorf("a new call went to %p, not the server's session now, %p", cs, second)
	}
}

// TestNewerListenWaitsForAck: holding a subscription on a session of the
// 2026-07-28 revision returns once the server has taken it. go-sdk's Subscribe returns when
// the listen is sent, and the server takes requests concurrently: a
// change told before it took the listen went unheard. The server here
// takes it only when let; cancelled before that, the hold fails.
func TestNewerListenWaitsForAck(t *testing.T) {
	g := newGate(watchedURI)
	s := subscribableServer("gated", g.subscribe)
	d := &downstream{}
	updated := make(chan string, 1)
	cs := connectListening(t, s, d, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	t.Cleanup(g.open)
	ctx := context.Background()

	lctx, cancel := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() { held <- d.hold(lctx, cs, watchedURI) }()
	<-g.entered
	cancel()
	if err := <-held; err == nil {
		t.Fatal("the hold returned before the server took the listen")
	}
	g.open()
	if err := d.hold(ctx, cs, watchedURI); err != nil {
		t.Fatal(err)
	}
	s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI})
	if got := <-updated; got != watchedURI {
		t.Errorf("resources/updated for %q", got)
	}
}

// TestStatelessHTTPSubscription: a subscription to a resource of an HTTP
// server of the 2026-07-28 revision is held once the server has taken it,
// as on a stdio server's newer session (listen.go): go-sdk's
// Subscribe returns when the listen is sent and the server takes
// requests concurrently, so a change told before the server took it went
// unheard. The server here takes it a while after it entered the
// subscription. Unsubscribing and subscribing again keeps the one listen
// (the server takes one subscription): a cancelled listen's end could
// remove the new listen for the URI.
func TestStatelessHTTPSubscription(t *testing.T) {
	var taken atomic.Int64
	srv := subscribableServer("slow", func(string) error {
		if taken.Add(1) == 1 {
			// Unheard if the proxy answered its client before this.
			time.Sleep(200 * time.Millisecond)
		}
		return nil
	})
	url := serveStateless(t, srv, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Method") == "subscriptions/listen" {
				// Its event stream opens before the server takes the listen, as
				// some servers' do (go-sdk's opens with the acknowledgement);
				// the body is read first, which net/http's HTTP/1 server closes
				// once the answer began.
				body, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				w = openedStream{w}
			}
			h.ServeHTTP(w, r)
		})
	})
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "h", URL: url}}, nil)
	if cs, err := p.downstreams()[0].session(); err != nil || !sessionStateless(cs) {
		t.Fatalf("the server's session: %v", err)
	}
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	for i := range 2 {
		if i > 0 {
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "h+fixture:///watched"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "h+fixture:///watched"}); err != nil {
			t.Fatal(err)
		}
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
			t.Fatal(err)
		}
		cl.waitUpdated(t, "h+fixture:///watched", fmt.Sprintf("subscription %d", i+1))
	}
	if n := taken.Load(); n != 1 {
		t.Errorf("the server took %d subscriptions, want 1", n)
	}
}

// TestStatelessHTTPNoSubscriptions: a subscription to a resource of an
// HTTP server of the 2026-07-28 revision that offers no subscriptions is
// refused at once, saying so; the server would never acknowledge it.
func TestStatelessHTTPNoSubscriptions(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	srv.AddResource(&mcp.Resource{Name: "w", URI: "fixture:///watched"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "watched"}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(down.Close)
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "h", URL: down.URL, Timeout: time.Second}}, nil)
	cs := connectMemory(t, p, nil)
	err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "h+fixture:///watched"})
	if err == nil || !strings.Contains(err.Error(), errNoSubscriptions.Error()) {
		t.Fatalf("subscribing: %v, want %q", err, errNoSubscriptions)
	}
}

// openedStream is a response whose status was written.
type openedStream struct{ http.ResponseWriter }

func (openedStream) WriteHeader(int) {}

func (o openedStream) Flush() { o.ResponseWriter.(http.Flusher).Flush() }

// TestNewerSessionWaitEndsAtDrain: a 2026-07-28 request let in to a
// stdio server waits in sessionFor for the server's newer session, whose
// start applies its lists under the catalogue a change's drain holds
// (changeServer). Once the server's gate is closed (the drain began), the
// request stops waiting and is served on the one session, so the drain
// ends when its requests do, not when its bound cuts them.
func TestNewerSessionWaitEndsAtDrain(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "s")}, nil)
	d := p.downstreams()[0]
	one, err := d.sup.await(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d.cat.syncMu.Lock() // as the drain holds it: the newer session's lists wait
	defer d.cat.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // for a hang, not a bound
	defer cancel()
	type found struct {
		cs  *mcp.ClientSession
		err error
	}
	got := make(chan found, 1)
	go func() {
		cs, err := d.sessionFor(ctx, statelessProtocol)
		got <- found{cs, err}
	}()
	d.gate.close()
	if f := <-got; f.err != nil || f.cs != one {
		t.Fatalf("with the gate closed, sessionFor returned %p, %v; want the one session %p", f.cs, f.err, one)
	}
}

// TestAwaitRestartBounded: a request that finds its server restarting
// waits for the next session no longer than the call's timeout, and then
// says so; one that finds the session up is given it without waiting.
func TestAwaitRestartBounded(t *testing.T) {
	s := newSupervisor("s", nil, nil, nil, nil)
	s.restarting = true
	if cs, err := s.await(context.Background(), 10*time.Millisecond); cs != nil || err == nil || !strings.Contains(err.Error(), "not restarted within the call's timeout") {
		t.Fatalf("await while restarting: %p, %v", cs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if cs, err := s.await(ctx, time.Hour); cs != nil || err == nil {
		t.Fatalf("await with its context ended: %p, %v", cs, err)
	}
	up := new(mcp.ClientSession)
	s.cs = up
	// Connected, its lists not read yet (serve): a call's entry would
	// name the last session's definitions.
	if cs, err := s.await(context.Background(), 10*time.Millisecond); cs != nil || err == nil {
		t.Fatalf("await while the new session's lists are read: %p, %v", cs, err)
	}
	s.restarting = false
	if cs, err := s.await(context.Background(), time.Hour); cs != up || err != nil {
		t.Fatalf("await with the session up: %p, %v; want %p", cs, err, up)
	}
}
