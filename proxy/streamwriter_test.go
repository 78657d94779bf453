package proxy

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// A stallListener's connections stop taking what the server writes once a
// write holds stallOn (a client that stopped reading, its socket buffers
// full): such a write, and every later one, blocks until release.
type stallListener struct {
	net.Listener
	stallOn []byte
	blocked chan struct{} // closed when a write first blocks
	once    sync.Once
	release chan struct{}
}

func newStallListener(l net.Listener, stallOn string) *stallListener {
	return &stallListener{Listener: l, stallOn: []byte(stallOn), blocked: make(chan struct{}), release: make(chan struct{})}
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l}, nil
}

type stallConn struct {
	net.Conn
	l       *stallListener
	stalled bool
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.stalled || bytes.Contains(b, c.l.stallOn) {
		c.stalled = true
		c.l.once.Do(func() { close(c.l.blocked) })
		<-c.l.release
	}
	return c.Conn.Write(b)
}

// serveStalling serves p's HTTP front on a listener whose connections
// stall at the first write holding stallOn.
func serveStalling(t *testing.T, p *Proxy, stallOn string) (string, *stallListener) {
	t.Helper()
	srv := httptest.NewUnstartedServer(p.HTTPHandler(staticTokens(func(tok string) (string, bool) {
		return testActor, tok == testToken
	})))
	sl := newStallListener(srv.Listener, stallOn)
	srv.Listener = sl
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(sl.release) }) // before srv.Close
	return srv.URL + "/mcp", sl
}

// TestHTTPStalledClient: an HTTP client that stops reading the event
// stream of its call while a stdio server streams it progress holds up
// only itself: another client's call to the same server completes, and
// the progress held for it is bounded (dropped past maxPipeQueue). The
// SDK's handler wrote each notification to the connection from the
// server's read loop, so the server's answers to everyone waited for the
// stalled client.
func TestHTTPStalledClient(t *testing.T) {
	l := newTestLog(t)
	logs := &proctest.Buffer{}
	p := startProxy(t, l, []ServerConfig{{ID: "f", Command: fixtureServer(t), Env: map[string]string{fixtureEnv: "stream"}}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	url, sl := serveStalling(t, p, `"notifications/progress"`)
	stalled := connectHTTP(t, url, "2025-11-25", nil)
	other := connectHTTP(t, url, "2025-11-25", nil)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	go stalled.CallTool(sctx, &mcp.CallToolParams{Name: "f__stream", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "s"}})
	select {
	case <-sl.blocked:
	case <-time.After(time.Minute): // for a hung front, not a bound
		t.Fatal("no progress was written to the client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // for a hung server, not a bound
	defer cancel()
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "f__ok", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("another client's call, while one is stalled: %v", err)
	}
	if got := textOf(res); got != "ok" {
		t.Errorf("the other client's call: %q", got)
	}
	// The stalled client's progress is dropped once a queue's worth is
	// held for it, not kept without bound.
	for !strings.Contains(logs.String(), "its progress and log notifications are dropped until it does") {
		select {
		case <-ctx.Done(): // for a hung front, not a bound
			t.Fatalf("no notification was dropped for the stalled client: %s", logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
