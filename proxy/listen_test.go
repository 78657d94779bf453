package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refusalCode is the code of the test servers' refusals of a subscription.
const refusalCode = -32042

// refusal is a test server's refusal of a subscription to uri.
func refusal(uri string) error {
	return &jsonrpc.Error{Code: refusalCode, Message: "not yet: " + uri}
}

// TestRefusedSubscription: a server of the 2026-07-28 revision that
// refuses a subscription (a JSON-RPC error for the listen) has the client
// told its error, and the next subscription to the URI is asked of it
// anew and held. go-sdk sends a listen without waiting for its answer, so
// the proxy waited out the server's timeout for an acknowledgement that
// never came, and then took the URI for subscribed: the next subscription
// sent nothing and waited again. Over stdio (the fixture's process, its
// revision pinned) and HTTP (a go-sdk server of the test's).
func TestRefusedSubscription(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (ServerConfig, func(p *Proxy, cs *mcp.ClientSession))
	}{
		{"stdio", func(t *testing.T) (ServerConfig, func(*Proxy, *mcp.ClientSession)) {
			cfg := fixtureServerConfig(t, "fx")
			cfg.Env[fixtureEnv], cfg.Protocol = "refuse", statelessProtocol
			return cfg, func(_ *Proxy, cs *mcp.ClientSession) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__touch"})
				if err != nil || res.IsError || textOf(res) != "touched: <nil>; taken: 1" {
					t.Fatalf("fx__touch: %v %v", err, res)
				}
			}
		}},
		{"http", func(t *testing.T) (ServerConfig, func(*Proxy, *mcp.ClientSession)) {
			var asked atomic.Int64
			srv := mcp.NewServer(&mcp.Implementation{Name: "refusing", Version: "1"}, &mcp.ServerOptions{
				SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
					if asked.Add(1) == 1 {
						return refusal(req.Params.URI)
					}
					return nil
				},
				UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			})
			srv.AddResource(&mcp.Resource{Name: "w", URI: "fixture:///watched"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "watched"}}}, nil
			})
			down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
			t.Cleanup(down.Close)
			return ServerConfig{ID: "fx", URL: down.URL}, func(*Proxy, *mcp.ClientSession) {
				if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "fixture:///watched"}); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, touch := tc.start(t)
			// Short, so that the run without the refusal seen fails soon.
			cfg.Timeout = 3 * time.Second
			p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
			if cs, err := p.downstreams()[0].session(); err != nil || !sessionStateless(cs) {
				t.Fatalf("the server's session: %v", err)
			}
			cl := newClientLog()
			cs := connectMemory(t, p, cl)
			const uri = "fx+fixture:///watched"
			err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != refusalCode || we.Message != "not yet: fixture:///watched" {
				t.Fatalf("the refused subscription: %v, want the server's error %d %q", err, refusalCode, "not yet: fixture:///watched")
			}
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("subscribing again: %v", err)
			}
			touch(p, cs)
			cl.waitUpdated(t, uri, "after the refusal")
		})
	}
}

// TestListensOfTwoSessions: the subscriptions held on two sessions of
// the 2026-07-28 revision of one downstream (the one a reconnect replaces
// and its successor) are each their session's. Only one session's were
// kept: a hold on the old session while the new one's waited for its
// acknowledgement dropped the new one's, which then waited out its
// context, and its URI, taken by go-sdk for subscribed, was never asked
// of the new session again.
func TestListensOfTwoSessions(t *testing.T) {
	entered, let := make(chan struct{}), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "gated", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == "fixture:///gated" {
				close(entered)
				<-let
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{Name: "g", URI: "fixture:///gated"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "gated"}}}, nil
	})
	ctx := context.Background()
	d := &downstream{}
	connect := func() *mcp.ClientSession {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		client := mcp.NewClient(&mcp.Implementation{Name: "provlog", Version: "1"}, nil)
		client.AddReceivingMiddleware(d.noteListenAcks)
		cs, err := client.Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if !sessionStateless(cs) {
			t.Fatalf("the session speaks %s", cs.InitializeResult().ProtocolVersion)
		}
		return cs
	}
	old, renewed := connect(), connect()
	letGo := sync.OnceFunc(func() { close(let) })
	t.Cleanup(letGo) // before the sessions close

	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- d.hold(hctx, renewed, "fixture:///gated") }()
	<-entered
	if err := d.hold(hctx, old, "fixture:///other"); err != nil {
		t.Fatalf("holding on the old session: %v", err)
	}
	letGo()
	if err := <-held; err != nil {
		t.Fatalf("holding on the new session: %v", err)
	}
	if err := d.hold(hctx, renewed, "fixture:///gated"); err != nil {
		t.Fatalf("holding on the new session again: %v", err)
	}
}

// TestSubscriptionAcrossReconnect: a subscription whose server's process
// dies before it acknowledged it is held on the process that replaces it,
// and the client is told it subscribed. The hold waited on the ended
// session for its timeout, and the client was told the subscription
// failed, though the server's return might have renewed it.
func TestSubscriptionAcrossReconnect(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv], cfg.Protocol, cfg.Dir = "hangfirst", statelessProtocol, t.TempDir()
	cfg.Timeout = 10 * time.Second // so that the run without the fix fails sooner
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, nil)
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	const uri = "fx+fixture:///watched"
	subscribed := make(chan error, 1)
	go func() { subscribed <- cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}) }()
	var pid int
	waitFor(t, "the first process to be asked for the subscription", func() bool {
		b, _ := os.ReadFile(filepath.Join(cfg.Dir, "hung"))
		pid, _ = strconv.Atoi(string(b))
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-subscribed; err != nil {
		t.Fatalf("subscribing while the server's process died: %v", err)
	}
	waitFor(t, "the process that replaced it to hold the subscription", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__touch"})
		return err == nil && !res.IsError && textOf(res) == "touched: <nil>; taken: 1"
	})
	cl.waitUpdated(t, uri, "the new session's subscription")
}
