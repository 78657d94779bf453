package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// A stallListener's connection stops taking what the server writes once a
// write holds stallOn while the listener is armed (a client that stopped
// reading, its socket buffers full): such a write, and every later one on
// that connection, blocks until release. It stalls one connection, the
// first to write stallOn once armed; it is armed from the start.
type stallListener struct {
	net.Listener
	stallOn []byte
	armed   atomic.Bool
	blocked chan struct{} // closed when a write first blocks
	release chan struct{}
}

func newStallListener(l net.Listener, stallOn string) *stallListener {
	sl := &stallListener{Listener: l, stallOn: []byte(stallOn), blocked: make(chan struct{}), release: make(chan struct{})}
	sl.armed.Store(true)
	return sl
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
	if c.stalled || c.l.armed.Load() && bytes.Contains(b, c.l.stallOn) && c.l.armed.CompareAndSwap(true, false) {
		if !c.stalled {
			c.stalled = true
			close(c.l.blocked)
		}
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

// TestHTTPStalledClient: an HTTP client (of a stateful session, or
// sessionless) that stops reading the event stream of its call while a stdio server streams it progress holds up
// only itself: another client's call to the same server completes, and
// the progress held for it is bounded (dropped past maxPipeQueue). The
// SDK's handler wrote each notification to the connection from the
// server's read loop, so the server's answers to everyone waited for the
// stalled client.
func TestHTTPStalledClient(t *testing.T) {
	for _, version := range []string{"2025-11-25", statelessProtocol} {
		t.Run(version, func(t *testing.T) { testHTTPStalledClient(t, version) })
	}
}

func testHTTPStalledClient(t *testing.T, version string) {
	if version == statelessProtocol {
		version = "" // what connectHTTP negotiates
	}
	l := newTestLog(t)
	logs := &proctest.Buffer{}
	p := startProxy(t, l, []ServerConfig{{ID: "f", Command: fixtureServer(t), Env: map[string]string{fixtureEnv: "stream"}}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	url, sl := serveStalling(t, p, `"notifications/progress"`)
	stalled := connectHTTP(t, url, version, nil)
	other := connectHTTP(t, url, version, nil)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	// 4 MiB of progress, then the answer: the call ends by itself (a
	// sessionless one is not cancelled with its request, see the SDK's
	// propagateCancellation).
	go stalled.CallTool(sctx, &mcp.CallToolParams{Name: "f__stream", Arguments: map[string]any{"n": 4096}, Meta: mcp.Meta{"progressToken": "s"}})
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

// TestResumeStalledClient: a client that resumes a call's stream and does
// not read it holds up only itself: other calls whose streams, kept in
// its place, push it out of the kept ones are answered. Dropping a kept
// stream waited for the stream's lock, which the stalled resume held
// while it wrote, so the call that dropped it never returned.
func TestResumeStalledClient(t *testing.T) {
	down := newStreamServer(t)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.url}}, nil)
	front, sl := serveStalling(t, p, bigText[:64])
	sl.armed.Store(false)
	other := connectHTTP(t, front, "2025-11-25", nil)
	sid := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil)).ID()
	body, first := postCall(t, front, sid, "big")
	for ev := body.next(t); ev != nil; ev = body.next(t) {
	}
	sl.armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Last-Event-ID", first["id"])
		req.Header.Set("Authorization", "Bearer "+testToken)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-sl.blocked:
	case <-time.After(time.Minute): // for a hung front, not a bound
		t.Fatal("the resumed stream was not written")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second) // for a hung front, not a bound
	defer ccancel()
	// Two big answers, then small ones until the stalled stream is pushed
	// out of the delivered ones' budget (deliveredStreamBytes), and one
	// more. A small one's client has its answer only when its handler
	// returns (a big one's, before).
	fs, _ := p.sessions.Load(sid)
	sst, _ := fs.(*frontSession).streams.Load(strings.Split(first["id"], "_")[0])
	stalledStream := sst.(*callStream)
	dropped := func() bool {
		p.kept.mu.Lock()
		defer p.kept.mu.Unlock()
		return stalledStream.dropped
	}
	for i, more := 0, true; more; i++ {
		more = !dropped()
		tool := "ev__echo"
		if i < 2 {
			tool = "ev__big"
		}
		if _, err := other.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}); err != nil {
			t.Fatalf("call %d of another client, while one is stalled on a resumed stream: %v", i, err)
		}
	}
}

// TestStreamWriterStalled: while its client does not read, a streamWriter
// takes every write at once: it queues answers, requests and
// notifications other than progress and log messages whatever it holds,
// and drops progress and log messages once it holds maxPipeQueue bytes,
// saying so. What it wrote reaches the client in the order written, and
// the handler returns once it has.
func TestStreamWriterStalled(t *testing.T) {
	event := func(msg string) string { return "event: message\ndata: " + msg + "\n\n" }
	progress := func(i int) string {
		return event(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":` + strconv.Itoa(i) + `,"message":"` + strings.Repeat("p", 1<<10) + `"}}`)
	}
	sent := []string{event(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`)}
	for i := 1; i <= 2000; i++ {
		sent = append(sent, progress(i))
	}
	sent = append(sent,
		event(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`),
		event(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`),
		event(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	logs := &proctest.Buffer{}
	var total int
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := newStreamWriter(w, slog.New(slog.NewTextHandler(logs, nil)))
		defer sw.close()
		sw.Header().Set("Content-Type", "text/event-stream")
		sw.WriteHeader(http.StatusOK)
		sw.Write([]byte(progress(0))) // the client stops reading here
		sw.Flush()
		<-srv.Listener.(*stallListener).blocked
		for _, b := range sent { // none of them waits for the client
			if n, err := sw.Write([]byte(b)); n != len(b) || err != nil {
				t.Errorf("write: %d, %v", n, err)
			}
			sw.Flush()
		}
		sw.mu.Lock()
		total = sw.drops.total
		sw.mu.Unlock()
		close(srv.Listener.(*stallListener).release)
	}))
	srv.Listener = newStallListener(srv.Listener, `"progress":0,`)
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if total < 900 || total > 1100 {
		t.Errorf("dropped %d of 2000 progress notifications and a log message; want those past %d bytes", total, maxPipeQueue)
	}
	if !strings.Contains(logs.String(), "its progress and log notifications are dropped until it does") {
		t.Errorf("the drops were not logged: %s", logs.String())
	}
	// What was kept is what was sent, but for the last total progress
	// and log notifications, in order.
	want := progress(0)
	kept := 0
	for _, b := range sent {
		if droppableEvent([]byte(b)) && kept >= 2001-total {
			continue
		}
		if droppableEvent([]byte(b)) {
			kept++
		}
		want += b
	}
	if string(body) != want {
		t.Errorf("the client read %d bytes, want %d: %.200q", len(body), len(want), body)
	}
}

// TestStreamWriterGivesUp: a client that takes nothing of its stream for
// the write timeout is given up: its queue is let go, later writes are
// refused saying why, and the handler returns.
func TestStreamWriterGivesUp(t *testing.T) {
	logs := &proctest.Buffer{}
	refused := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := newStreamWriter(w, slog.New(slog.NewTextHandler(logs, nil)))
		sw.timeout = 100 * time.Millisecond
		defer sw.close()
		sw.Header().Set("Content-Type", "text/event-stream")
		sw.WriteHeader(http.StatusOK)
		sw.Flush()
		ev := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"" + strings.Repeat("r", 64<<10) + "\"}}\n\n")
		for range 1000 { // 64 MiB, well past what the sockets hold
			if _, err := sw.Write(ev); err != nil {
				refused <- err
				return
			}
			sw.Flush()
			time.Sleep(time.Millisecond)
		}
		refused <- nil
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) // and nothing read
	err = <-refused
	if err == nil || !strings.Contains(err.Error(), "the client took nothing of its event stream for 100ms; given up") {
		t.Errorf("writes to a client that reads nothing: %v", err)
	}
	if !strings.Contains(logs.String(), "the rest of it is dropped") {
		t.Errorf("the giving up was not logged: %s", logs.String())
	}
}

// TestHTTPStalledGETStream: a client that does not read its standalone
// event stream (the GET), where a stdio server's log messages during its
// call go, holds up only itself: another client's call to the same server
// completes.
func TestHTTPStalledGETStream(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "f", Command: fixtureServer(t), Env: map[string]string{fixtureEnv: "stream"}}}, nil)
	url, sl := serveStalling(t, p, `"notifications/message"`)
	stalled := fastSession(t, p, connectHTTP(t, url, "2025-11-25", nil))
	if err := stalled.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	other := connectHTTP(t, url, "2025-11-25", nil)
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	go stalled.CallTool(sctx, &mcp.CallToolParams{Name: "f__logs", Arguments: map[string]any{}})
	select {
	case <-sl.blocked:
	case <-time.After(time.Minute): // for a hung front, not a bound
		t.Fatal("no log message was written to the client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // for a hung server, not a bound
	defer cancel()
	if _, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "f__ok", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("another client's call, while one does not read its GET stream: %v", err)
	}
}

// TestStreamWriterBehind: what a streamWriter holds for a client that
// does not read, but for one write, is bounded: a write that would take
// it over maxStreamBehind gives the client up, saying so.
func TestStreamWriterBehind(t *testing.T) {
	ev := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"" + strings.Repeat("u", 1<<20) + "\"}}\n\n"
	refused := make(chan error, 1)
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := newStreamWriter(w, slog.New(slog.NewTextHandler(io.Discard, nil)))
		defer sw.close()
		sw.WriteHeader(http.StatusOK)
		sw.Write([]byte("event: message\ndata: stall\n\n")) // the client stops reading here
		sw.Flush()
		<-srv.Listener.(*stallListener).blocked
		var err error
		for i := 0; i < 2*maxStreamBehind>>20 && err == nil; i++ {
			_, err = sw.Write([]byte(ev))
		}
		refused <- err
		close(srv.Listener.(*stallListener).release)
	}))
	srv.Listener = newStallListener(srv.Listener, "data: stall")
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err := <-refused; err == nil || !strings.Contains(err.Error(), "the client is over "+strconv.Itoa(maxStreamBehind>>20)+" MiB behind on its event stream; given up") {
		t.Errorf("%d MiB written for a client that reads nothing: %v", 2*maxStreamBehind>>20, err)
	}
}
