package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// The neighbours of a forgotten session, each seen through the proxy as a
// client sees a server directly.

// holdServer is a streamable HTTP server, restartable behind its URL, with
// a tool "hold" that answers only when released, counting the calls that
// started.
type holdServer struct {
	swappable
	started   atomic.Int64
	release   chan struct{}
	resumable bool // its streams have event ids (an event store)
}

func newHoldServer(t *testing.T, wrap func(http.Handler) http.Handler, resumable bool) *holdServer {
	s := &holdServer{release: make(chan struct{}), resumable: resumable}
	s.restartHold(wrap)
	s.srv = httptestServer(t, &s.swappable)
	return s
}

func (s *holdServer) restartHold(wrap func(http.Handler) http.Handler) {
	s.restart(nil, wrap)
	srv := mcp.NewServer(&mcp.Implementation{Name: "hold", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "touch"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	release := s.release
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil, nil
	})
	var opts *mcp.StreamableHTTPOptions
	if s.resumable {
		opts = &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	if wrap != nil {
		h = wrap(h)
	}
	s.h.Store(&h)
}

// TestHTTPRestartMidStream: the server restarts while a call's answer is
// on its way (the call ran, or started: its outcome is unknown). The
// agent gets an error for it, the log holds the call with a failed
// call.result, the call is never sent again (it may have run), and the
// next call works.
func TestHTTPRestartMidStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wrap      func(http.Handler) http.Handler
		resumable bool
	}{{"GETStream", nil, false}, {"NoGET", noGET, false}, {"Resumable", nil, true}, {"ResumableNoGET", noGET, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHoldServer(t, tc.wrap, tc.resumable)
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
			cs := connectMemory(t, p, nil)
			ctx := context.Background()
			errc := make(chan error, 1)
			go func() { errc <- callTool(ctx, cs, "s__hold") }()
			for s.started.Load() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			s.restartHold(tc.wrap)
			s.srv.CloseClientConnections()
			var err error
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second): // a liveness bound
				t.Fatal("the call did not end after its server restarted")
			}
			started := s.started.Load()
			close(s.release)
			nextErr := callTool(ctx, cs, "s__touch")
			calls, results, bad := callEntries(t, l)
			t.Logf("the held call: %v; started %d times; next call: %v; log: %d call, %d call.result (%d failed)", err, started, nextErr, calls, results, bad)
			if err == nil {
				t.Error("the call cut off by the restart succeeded")
			}
			if started != 1 {
				t.Errorf("the call cut off by the restart started %d times: sent again", started)
			}
			if nextErr != nil {
				t.Errorf("the call after the restart: %v", nextErr)
			}
			if calls != 2 || results != 2 || bad != 1 {
				t.Errorf("log: %d call, %d call.result (%d failed); want 2, 2 (1 failed)", calls, results, bad)
			}
		})
	}
}

// closesGET ends every GET stream at once, as a server that keeps no
// stream open does.
func closesGET(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestHTTPServerClosesGETStream: a server that ends its GET stream: calls
// through the proxy work as they do directly.
func TestHTTPServerClosesGETStream(t *testing.T) {
	var gets atomic.Int64
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				gets.Add(1)
			}
			closesGET(h).ServeHTTP(w, r)
		})
	}
	s := newSwappable(t, nil, count)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	const n = 5
	var failed int
	for range n {
		if err := callTool(ctx, cs, "s__touch"); err != nil {
			failed++
			t.Log(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := p.live["s"].d.sup.status()
	t.Logf("%d of %d calls failed, %d ran; GET requests %d; restarts %d, state %s %s", failed, n, s.ran.Load(), gets.Load(), st.restarts, st.state, st.lastErr)
	if failed > 0 || s.ran.Load() != n {
		t.Errorf("%d of %d calls failed, %d ran", failed, n, s.ran.Load())
	}
}

// TestStdioServerKilledBetweenCalls: a stdio server killed (kill -9)
// between two calls is restarted by the supervisor; the call after it
// goes to the new process.
func TestStdioServerKilledBetweenCalls(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	const n = 4
	var failed []string
	for i := range n {
		if err := callTool(ctx, cs, "fx__ok"); err != nil {
			t.Fatalf("before kill %d: %v", i, err)
		}
		pid := p.live["fx"].d.sup.status().pid
		if pid == 0 {
			t.Fatalf("kill %d: no process", i)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Between two calls: once the proxy has seen the process end (a
		// call sent before that may have been read by the dying server,
		// its outcome unknown, and is not the case here).
		proctest.WaitFor(t, "the proxy to see the kill", func() bool { return p.live["fx"].d.sup.status().pid != pid })
		if err := callTool(ctx, cs, "fx__ok"); err != nil {
			failed = append(failed, err.Error())
		}
	}
	calls, results, bad := callEntries(t, l)
	t.Logf("%d of %d calls after a kill failed: %s; log: %d call, %d call.result (%d failed)", len(failed), n, strings.Join(failed, " | "), calls, results, bad)
	if len(failed) > 0 {
		t.Errorf("%d of %d calls after a kill -9 of the server failed", len(failed), n)
	}
}

// TestHTTPResumeFindsSessionGone: a call's event stream is cut by a
// restart of the server, and its resumption is answered 404: the server
// forgot the session. The call is not sent again (it may have run), but
// the session is renewed then, as after a 404 to a call, and the agent is
// told so, rather than the dead session being kept as up until the next
// call finds it gone.
func TestHTTPResumeFindsSessionGone(t *testing.T) {
	s := newHoldServer(t, nil, true)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
	cs := connectMemory(t, p, nil)
	errc := make(chan error, 1)
	go func() { errc <- callTool(context.Background(), cs, "s__hold") }()
	for s.started.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	s.restartHold(nil)
	s.srv.CloseClientConnections()
	err := <-errc
	close(s.release)
	st := p.live["s"].d.sup.status()
	t.Logf("the held call: %v; started %d times; restarts %d", err, s.started.Load(), st.restarts)
	if err == nil || !strings.Contains(err.Error(), "being reconnected") {
		t.Errorf("the agent got %v, want the call's failure and that the server is being reconnected", err)
	}
	if s.started.Load() != 1 {
		t.Errorf("the call started %d times", s.started.Load())
	}
	proctest.WaitFor(t, "the forgotten session to be renewed", func() bool { return p.live["s"].d.sup.status().restarts > 0 })
	if calls, results, bad := callEntries(t, l); calls != 1 || results != 1 || bad != 1 {
		t.Errorf("log: %d call, %d call.result (%d failed); want 1, 1 (1 failed)", calls, results, bad)
	}
}
