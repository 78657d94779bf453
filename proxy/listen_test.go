package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// watchedURI is the resource of a subscribableServer.
const watchedURI = "fixture:///watched"

// subscribableServer is a go-sdk server of one resource, watchedURI, that
// offers subscriptions; subscribe, if not nil, answers each (a server of
// the 2026-07-28 revision acknowledges the listen once it returned nil).
func subscribableServer(name string, subscribe func(uri string) error) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if subscribe == nil {
				return nil
			}
			return subscribe(req.Params.URI)
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{Name: "w", URI: watchedURI}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "watched"}}}, nil
	})
	return srv
}

// serveStateless serves srv over stateless streamable HTTP, through wrap
// if not nil, and returns its URL.
func serveStateless(t *testing.T, srv *mcp.Server, wrap func(http.Handler) http.Handler) string {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	if wrap != nil {
		h = wrap(h)
	}
	down := httptest.NewServer(h)
	t.Cleanup(down.Close)
	return down.URL
}

// A subscribeGate holds a subscribableServer's subscriptions to one URI until it
// is opened.
type subscribeGate struct {
	uri     string
	entered chan struct{} // closed once a subscription waits at the gate
	enter   func()
	let     chan struct{}
	// open lets the subscriptions through; more calls do nothing. A
	// test's cleanup opens it before the sessions close, which wait for
	// their handlers.
	open func()
}

func newGate(uri string) *subscribeGate {
	g := &subscribeGate{uri: uri, entered: make(chan struct{}), let: make(chan struct{})}
	g.enter = sync.OnceFunc(func() { close(g.entered) })
	g.open = sync.OnceFunc(func() { close(g.let) })
	return g
}

// subscribe is a subscribableServer's answer that holds g.uri's.
func (g *subscribeGate) subscribe(uri string) error {
	if uri == g.uri {
		g.enter()
		<-g.let
	}
	return nil
}

// connectListening connects a client with options opts to srv in memory
// on a session of the 2026-07-28 revision, its listens and their
// acknowledgements and refusals passed to d's listens as a downstream's
// client passes them (an acknowledged listen's end is not renewed).
func connectListening(t *testing.T, srv *mcp.Server, d *downstream, opts *mcp.ClientOptions) *mcp.ClientSession {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "provlog", Version: "1"}, opts)
	client.AddReceivingMiddleware(d.noteListenAcks)
	var session atomic.Pointer[mcp.ClientSession]
	hooks := listenHooks{
		sent: func(id jsonrpc.ID, uris []string) { d.listens.sent(session.Load(), id, uris) },
		refused: func(uris []string, err error) {
			if cs := session.Load(); cs != nil {
				d.listens.refused(cs, uris, err)
			}
		},
	}
	cs, err := client.Connect(ctx, &captureTransport{inner: ct, listens: hooks, asks: &askBudget{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	session.Store(cs)
	t.Cleanup(func() { cs.Close() })
	if !sessionStateless(cs) {
		t.Fatalf("the session speaks %s", cs.InitializeResult().ProtocolVersion)
	}
	return cs
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
			srv := subscribableServer("refusing", func(uri string) error {
				if asked.Add(1) == 1 {
					return refusal(uri)
				}
				return nil
			})
			return ServerConfig{ID: "fx", URL: serveStateless(t, srv, nil)}, func(*Proxy, *mcp.ClientSession) {
				if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
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

// TestSubscriptionHTTPError: a listen that an HTTP server answers with a
// bare HTTP error (its body no JSON-RPC error), or with an event stream it
// ends at once, or not at all (the connection dropped), is refused at
// once: the client is told the server's name and the status, not the body
// (an error page may quote what it was sent), and the next subscription
// to the URI is asked of the server anew and held. go-sdk takes such a
// listen for a rejected write and says nothing of it, so the proxy waited
// out its timeout for an acknowledgement; the timeout here is an hour, and
// the client's subscription has no deadline of its own.
func TestSubscriptionHTTPError(t *testing.T) {
	const secret = "s3cret-quoted-by-the-error-page"
	bare := func(code int) func(http.ResponseWriter, []byte) {
		return func(w http.ResponseWriter, _ []byte) { http.Error(w, "token "+secret, code) }
	}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, listen []byte)
		want   string // in the client's error, which names the server
		code   int64  // the server's JSON-RPC error the client gets instead, if not 0
	}{
		{"500", bare(http.StatusInternalServerError), "HTTP 500 Internal Server Error", 0},
		{"403", bare(http.StatusForbidden), "HTTP 403 Forbidden", 0},
		{"404", bare(http.StatusNotFound), "HTTP 404 Not Found", 0},
		{"stream ended", func(w http.ResponseWriter, _ []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
		}, "the server ended the subscription's stream", 0},
		{"dropped", func(w http.ResponseWriter, _ []byte) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}, "the connection to the server failed before it answered the subscription", 0},
		{"400 with a JSON-RPC error", func(w http.ResponseWriter, listen []byte) {
			var req struct{ ID json.RawMessage }
			json.Unmarshal(listen, &req)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"not yet"}}`, req.ID, refusalCode)
		}, "", refusalCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := subscribableServer("erring", nil)
			var listens atomic.Int64
			url := serveStateless(t, srv, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Mcp-Method") == "subscriptions/listen" {
						body, _ := io.ReadAll(r.Body)
						r.Body = io.NopCloser(bytes.NewReader(body))
						// go-sdk's own listen, for the lists' changes, is let be.
						if bytes.Contains(body, []byte(watchedURI)) && listens.Add(1) == 1 {
							tc.answer(w, body)
							return
						}
					}
					h.ServeHTTP(w, r)
				})
			})
			var logs lockedBuf
			cfg := ServerConfig{ID: "fx", URL: url, Timeout: time.Hour}
			p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			cl := newClientLog()
			cs := connectMemory(t, p, cl)
			ctx := context.Background()
			const uri = "fx+" + watchedURI
			err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
			var we *jsonrpc.Error
			switch {
			case tc.code != 0:
				if !errors.As(err, &we) || we.Code != tc.code || we.Message != "not yet" {
					t.Fatalf("the refused subscription: %v, want the server's error %d", err, tc.code)
				}
			case err == nil || !strings.Contains(err.Error(), `server "fx"`) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("the refused subscription: %v, want an error naming the server and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("the error page's body reached the client or the sidecar's log: %v", err)
			}
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("subscribing again: %v", err)
			}
			if n := listens.Load(); n != 2 {
				t.Errorf("the server was sent %d listens for the URI, want 2", n)
			}
			if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
				t.Fatal(err)
			}
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
	g := newGate(watchedURI)
	srv := subscribableServer("gated", g.subscribe)
	d := &downstream{}
	old, renewed := connectListening(t, srv, d, nil), connectListening(t, srv, d, nil)
	t.Cleanup(g.open)
	ctx := context.Background()

	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- d.hold(hctx, renewed, watchedURI) }()
	<-g.entered
	if err := d.hold(hctx, old, "fixture:///other"); err != nil {
		t.Fatalf("holding on the old session: %v", err)
	}
	g.open()
	if err := <-held; err != nil {
		t.Fatalf("holding on the new session: %v", err)
	}
	if err := d.hold(hctx, renewed, watchedURI); err != nil {
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

// A listenCutter wraps a server's handler: the stream of the n-th listen
// for watchedURI ends once the server acknowledged the listen and
// when(n) is closed (nil: never), with the listen's answer written first
// if answer is set; the server's handler writes nothing after that.
type listenCutter struct {
	h       http.Handler
	when    func(n int64) <-chan struct{}
	answer  bool
	eventID bool         // the stream ends with an event id
	resumes atomic.Int64 // GETs with Last-Event-ID
	listens atomic.Int64 // listens for watchedURI sent
	acked   atomic.Int64 // and acknowledged
}

func (c *listenCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Last-Event-ID") != "" {
		c.resumes.Add(1)
	}
	if r.Header.Get("Mcp-Method") != methodListen {
		c.h.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(watchedURI)) {
		c.h.ServeHTTP(w, r) // go-sdk's own listen, for the lists' changes
		return
	}
	when := c.when(c.listens.Add(1))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cw := &cutWriter{ResponseWriter: w, acked: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.h.ServeHTTP(cw, r.WithContext(ctx))
	}()
	select {
	case <-cw.acked:
		c.acked.Add(1)
		select {
		case <-when:
		case <-served:
		case <-r.Context().Done():
		}
	case <-served:
	}
	var req struct{ ID json.RawMessage }
	json.Unmarshal(body, &req)
	cw.cut(c.answer, c.eventID, req.ID)
	cancel()
	<-served
}

// A cutWriter passes a handler's writes on until cut.
type cutWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	cutOff bool
	ack    bool // the acknowledgement was written, not yet flushed
	acked  chan struct{}
}

func (w *cutWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cutOff {
		return len(b), nil
	}
	if bytes.Contains(b, []byte("notifications/subscriptions/acknowledged")) {
		w.ack = true
	}
	return w.ResponseWriter.Write(b)
}

func (w *cutWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cutOff {
		return
	}
	w.ResponseWriter.(http.Flusher).Flush()
	if w.ack {
		w.ack = false
		close(w.acked)
	}
}

// cut ends the handler's writes, after the listen id's answer if answer.
func (w *cutWriter) cut(answer, eventID bool, id json.RawMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if eventID {
		fmt.Fprintf(w.ResponseWriter, "id: listen-1\ndata: \n\n")
		w.ResponseWriter.(http.Flusher).Flush()
	}
	if answer {
		fmt.Fprintf(w.ResponseWriter, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n\n", id)
		w.ResponseWriter.(http.Flusher).Flush()
	}
	w.cutOff = true
}

// TestListenEndedAfterAck: a listen the server ends after acknowledging
// it (over HTTP its stream closed, or it answered the listen; over stdio
// it answered the listen) is renewed on the same session, and the client
// still subscribed hears the resource's updates. The proxy forgot the
// listen, or over stdio took it for held, and the client heard nothing
// more, though it had not unsubscribed.
func TestListenEndedAfterAck(t *testing.T) {
	ctx := context.Background()
	// A case starts a server whose first listen is ended by end, and
	// whose renewed listen is held once renewed says so; touch tells the
	// server's subscribers of a change.
	type server struct {
		cfg         ServerConfig
		end         func()
		renewed     func() bool
		touch       func()
		call        func(name string) string // set once the proxy runs
		sentListens func() int64             // over HTTP
	}
	overHTTP := func(answer bool) func(t *testing.T) *server {
		return func(t *testing.T) *server {
			srv := subscribableServer("ending", nil)
			drop := make(chan struct{})
			c := &listenCutter{answer: answer, when: func(n int64) <-chan struct{} {
				if n == 1 {
					return drop
				}
				return nil
			}}
			url := serveStateless(t, srv, func(h http.Handler) http.Handler { c.h = h; return c })
			return &server{
				cfg:     ServerConfig{ID: "fx", URL: url},
				end:     func() { close(drop) },
				renewed: func() bool { return c.acked.Load() == 2 },
				touch: func() {
					if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
						t.Fatal(err)
					}
				},
				sentListens: c.listens.Load,
			}
		}
	}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *server
	}{
		{"http stream ended", overHTTP(false)},
		{"http answered", overHTTP(true)},
		{"stdio answered", func(t *testing.T) *server {
			cfg := fixtureServerConfig(t, "fx")
			cfg.Env[fixtureEnv], cfg.Protocol = "endlisten", statelessProtocol
			s := &server{cfg: cfg}
			s.end = func() {
				if got := s.call("fx__end_listens"); got != "ended 1" {
					t.Fatalf("fx__end_listens: %s", got)
				}
			}
			// The server took a second subscription: it holds it before
			// it acknowledges it, and stdio keeps the order.
			s.renewed = func() bool { return strings.HasSuffix(s.call("fx__touch"), "taken: 2") }
			s.touch = func() { s.call("fx__touch") }
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.start(t)
			p := startProxy(t, newTestLog(t), []ServerConfig{s.cfg}, nil)
			cl := newClientLog()
			cs := connectMemory(t, p, cl)
			s.call = func(name string) string {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %v", name, err, res)
				}
				return textOf(res)
			}
			const uri = "fx+" + watchedURI
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("subscribing: %v", err)
			}
			s.end()
			waitFor(t, "the server to take a second listen", s.renewed)
			s.touch()
			cl.waitUpdated(t, uri, "after the server ended the first listen")
			if s.sentListens != nil {
				if n := s.sentListens(); n != 2 {
					t.Errorf("the server was sent %d listens, want 2", n)
				}
			}
		})
	}
}

// TestListenEndedAtOnce: a server that ends every renewed listen as soon
// as it acknowledged it is sent maxRenewals of them, and the sidecar's
// log warns, naming the server and the URI, its secret query value
// redacted; a client's next subscription asks the server anew.
func TestListenEndedAtOnce(t *testing.T) {
	const secret = "s3cret-token"
	srv := subscribableServer("ending", nil)
	srv.AddResource(&mcp.Resource{Name: "q", URI: watchedURI + "?token=" + secret}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "q"}}}, nil
	})
	drop, now := make(chan struct{}), make(chan struct{})
	close(now)
	c := &listenCutter{when: func(n int64) <-chan struct{} {
		switch {
		case n == 1:
			return drop
		case n <= 1+maxRenewals:
			return now
		}
		return nil
	}}
	url := serveStateless(t, srv, func(h http.Handler) http.Handler { c.h = h; return c })
	var logs lockedBuf
	cfg := ServerConfig{ID: "fx", URL: url, Redact: []string{"token"}}
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	uri := "fx+" + watchedURI + "?token=" + secret
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	close(drop)
	waitFor(t, "the warning that the proxy stopped renewing", func() bool {
		return strings.Contains(logs.String(), "no longer renewed")
	})
	if n := c.listens.Load(); n != 1+maxRenewals {
		t.Errorf("the server was sent %d listens, want %d", n, 1+maxRenewals)
	}
	_, warned, _ := strings.Cut(logs.String(), "no longer renewed")
	warned, _, _ = strings.Cut(warned, "\n")
	if !strings.Contains(warned, "server=fx") || !strings.Contains(warned, watchedURI+"?token=") || strings.Contains(warned, secret) {
		t.Errorf("the warning does not name the server and the URI, or holds the secret: %s", warned)
	}

	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing again: %v", err)
	}
	if n := c.listens.Load(); n != 2+maxRenewals {
		t.Errorf("the server was sent %d listens, want %d", n, 2+maxRenewals)
	}
	if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI + "?token=" + secret}); err != nil {
		t.Fatal(err)
	}
	cl.waitUpdated(t, uri, "after subscribing again")
}

// TestListenResumed: a listen whose stream the server ended after an
// event id is left to go-sdk, which resumes such a stream with a GET and
// Last-Event-ID; a go-sdk server of the 2026-07-28 revision answers that
// with 405 (SEP-2575 dropped resumption), go-sdk fails the session, and
// the session that replaces it holds the subscription (resubscribe). The
// proxy sends no listen of its own on the failed session, and the client
// still subscribed hears the resource's updates.
func TestListenResumed(t *testing.T) {
	srv := subscribableServer("ending", nil)
	drop := make(chan struct{})
	c := &listenCutter{eventID: true, when: func(n int64) <-chan struct{} {
		if n == 1 {
			return drop
		}
		return nil
	}}
	url := serveStateless(t, srv, func(h http.Handler) http.Handler { c.h = h; return c })
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "fx", URL: url}}, nil)
	cl := newClientLog()
	cs := connectMemory(t, p, cl)
	ctx := context.Background()
	const uri = "fx+" + watchedURI
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	first, err := p.downstreams()[0].session()
	if err != nil {
		t.Fatal(err)
	}
	close(drop)
	waitFor(t, "the server to acknowledge a second listen", func() bool { return c.acked.Load() == 2 })
	if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
	cl.waitUpdated(t, uri, "after the server ended the first listen")
	if now, err := p.downstreams()[0].session(); err != nil || now == first {
		t.Errorf("the session was not replaced (%v)", err)
	}
	if n, r := c.listens.Load(), c.resumes.Load(); n != 2 || r == 0 {
		t.Errorf("the server was sent %d listens and %d resumptions, want 2 and some", n, r)
	}
}
