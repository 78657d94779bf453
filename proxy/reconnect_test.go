package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// A downstream HTTP server that forgets the proxy's session (restarted
// behind its URL, or expiring sessions) answers the proxy's next request
// 404. MCP 2025-11-25 (transports, "Session Management"): a client given
// 404 for its session MUST start a new one with a new InitializeRequest.
// The agent's session is with the proxy and still valid, so the proxy is
// that client: it starts the new session and carries the call there, as a
// direct client that re-initializes would, and the agent sees no failure.

// goEverythingAt runs go-sdk's conformance everything-server, stateful,
// on addr, and returns a function that kills it (kill -9) and waits.
func goEverythingAt(t *testing.T, addr string) func() {
	t.Helper()
	cmd := exec.Command(goEverything(t), "-http", addr, "-stateless=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	kill := func() {
		if done.CompareAndSwap(false, true) {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	proctest.WaitListening(t, addr, "everything-server", nil)
	return kill
}

// callTool calls name through cs, an error for a failed call or a tool
// error.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err == nil && res.IsError {
		return fmt.Errorf("tool error: %s", textOf(res))
	}
	return err
}

// callEntries counts the log's call and call.result entries, and the
// call.result entries that say the call failed.
func callEntries(t *testing.T, l *testLog) (calls, results, failed int) {
	t.Helper()
	for i := range l.size(t) {
		e, err := log.ParseEntry(l.entry(t, i))
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case log.KindCall:
			calls++
		case log.KindCallResult:
			results++
			if r, err := log.ParseCallResult(e); err == nil && r.Error != "" {
				failed++
			}
		}
	}
	return calls, results, failed
}

// TestHTTPRestartCarriesCall: go-sdk's everything-server, a real
// process, is killed (kill -9) and started again on its address between
// calls. Each call after the restart must succeed, as it does for a
// direct client that starts a new session on 404, and be one call entry
// and one call.result.
func TestHTTPRestartCarriesCall(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	kill := goEverythingAt(t, addr)
	url := "http://" + addr + "/mcp"
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: url}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if err := callTool(ctx, cs, "ev__test_simple_text"); err != nil {
		t.Fatalf("before the restarts: %v", err)
	}
	const restarts = 4
	var failed []error
	for range restarts {
		kill()
		kill = goEverythingAt(t, addr)
		if err := callTool(ctx, cs, "ev__test_simple_text"); err != nil {
			failed = append(failed, err)
		}
	}
	calls, results, bad := callEntries(t, l)
	t.Logf("after %d restarts: %d calls failed; log: %d call, %d call.result (%d failed)", restarts, len(failed), calls, results, bad)
	if len(failed) > 0 {
		t.Errorf("%d of %d calls after a restart of the server failed: %v", len(failed), restarts, failed)
	}
	if calls != restarts+1 || results != restarts+1 || bad != len(failed) {
		t.Errorf("log: %d call entries, %d call.result (%d failed), want %d and %d (%d failed)", calls, results, bad, restarts+1, restarts+1, len(failed))
	}
}

// swappable is an in-process streamable HTTP server whose handler can be
// replaced, as a server restarted behind the same URL is: the new one
// knows none of the old one's sessions.
type swappable struct {
	h    atomic.Pointer[http.Handler]
	ran  atomic.Int64 // calls of its tool "touch" that ran
	srv  *httptest.Server
	desc string // the description of "touch" the next restart lists
}

func newSwappable(t *testing.T, opts *mcp.StreamableHTTPOptions, wrap func(http.Handler) http.Handler) *swappable {
	s := &swappable{}
	s.restart(opts, wrap)
	s.srv = httptestServer(t, s)
	return s
}

// httptestServer serves s's handler of the moment.
func httptestServer(t *testing.T, s *swappable) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	return srv
}

func (s *swappable) restart(opts *mcp.StreamableHTTPOptions, wrap func(http.Handler) http.Handler) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "swappable", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "touch", Description: s.desc}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		s.ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	if wrap != nil {
		h = wrap(h)
	}
	s.h.Store(&h)
}

// noGET answers 405 to GET, as MCP lets a server that offers no stream
// of its own do.
func noGET(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Allow", "POST, DELETE")
			http.Error(w, "no stream here", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestHTTPSessionExpiryCarriesCall: an in-process go-sdk server that
// answers 405 to GET (so the proxy's SDK client holds no stream that
// would notice) drops the proxy's session, restarted or expiring it; the
// next call is carried to a new session: it runs once, and succeeds.
func TestHTTPSessionExpiryCarriesCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"restarted", nil},
		{"expired", &mcp.StreamableHTTPOptions{SessionTimeout: 300 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSwappable(t, tc.opts, noGET)
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
			cs := connectMemory(t, p, nil)
			ctx := context.Background()
			const n = 3
			var failed []error
			for i := range n {
				if tc.opts == nil {
					s.restart(tc.opts, noGET)
				} else {
					time.Sleep(3 * tc.opts.SessionTimeout)
				}
				if err := callTool(ctx, cs, "s__touch"); err != nil {
					failed = append(failed, fmt.Errorf("call %d: %w", i, err))
				}
			}
			calls, results, bad := callEntries(t, l)
			t.Logf("%d of %d calls failed, %d ran; log: %d call, %d call.result (%d failed)", len(failed), n, s.ran.Load(), calls, results, bad)
			if len(failed) > 0 || s.ran.Load() != n {
				t.Errorf("%d of %d calls after the session was dropped failed, %d ran: %v", len(failed), n, s.ran.Load(), failed)
			}
			if calls != n || results != n || bad != len(failed) {
				t.Errorf("log: %d call entries, %d call.result (%d failed), want %d and %d (%d failed)", calls, results, bad, n, n, len(failed))
			}
		})
	}
}

// forgetsCalls answers 404 to every tools/call, as a server that forgets
// each session at once would: the session is accepted and listed, and
// the call refused.
func forgetsCalls(calls *atomic.Int64) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"tools/call"`)) {
					calls.Add(1)
					http.Error(w, "session not found", http.StatusNotFound)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestHTTPSessionForgottenEveryTime: a server that forgets every new
// session at the first call is asked on a bounded number of sessions
// (its first and maxSessionRenewals new ones: 3), then the call fails, unrun, with an error
// naming the server; the log holds one call and its failed call.result.
func TestHTTPSessionForgottenEveryTime(t *testing.T) {
	var calls atomic.Int64
	s := newSwappable(t, nil, forgetsCalls(&calls))
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
	cs := connectMemory(t, p, nil)
	err := callTool(context.Background(), cs, "s__touch")
	t.Logf("tools/call requests the server refused: %d; the agent got: %v", calls.Load(), err)
	if err == nil || !strings.Contains(err.Error(), `server "s"`) || !strings.Contains(err.Error(), "not run") {
		t.Errorf("the agent got %v, want an error naming server \"s\" and saying the call was not run", err)
	}
	if got, want := calls.Load(), int64(3); got != want {
		t.Errorf("the call was sent %d times, want %d (a first session and 2 new ones)", got, want)
	}
	if calls, results, bad := callEntries(t, l); calls != 1 || results != 1 || bad != 1 {
		t.Errorf("log: %d call entries, %d call.result (%d failed), want 1, 1 (1 failed)", calls, results, bad)
	}
}

// TestHTTPRenewedSessionOtherDefinition: a server restarted behind its URL
// with another definition of the tool called: the call, recorded against
// the old definition, is not carried to the new session (it would run
// against a definition its entry does not name); it fails unrun, saying
// why, the new list is a tools entry, and the next call names it.
func TestHTTPRenewedSessionOtherDefinition(t *testing.T) {
	s := newSwappable(t, nil, noGET)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	s.desc = "now does something else"
	s.restart(nil, noGET)
	err := callTool(ctx, cs, "s__touch")
	if err == nil || !strings.Contains(err.Error(), "another definition") || s.ran.Load() != 0 {
		t.Fatalf("the call after the definition changed: %v, %d ran; want it refused unrun, naming another definition", err, s.ran.Load())
	}
	if err := callTool(ctx, cs, "s__touch"); err != nil || s.ran.Load() != 1 {
		t.Fatalf("the next call: %v, %d ran", err, s.ran.Load())
	}
	var sums []string
	for i := range l.size(t) {
		e, _ := log.ParseEntry(l.entry(t, i))
		if e.Kind == log.KindCall {
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, c.ToolSHA256)
		}
	}
	if len(sums) != 2 || sums[0] == sums[1] {
		t.Errorf("the calls' tool_sha256: %q, want two, the second the new definition's", sums)
	}
}

// TestHTTPSessionForgottenConcurrentCalls: calls under way together when
// the server forgets the session are each carried once: every one runs
// once and is one call entry and one call.result, and the session is
// renewed for them together, not once a call.
func TestHTTPSessionForgottenConcurrentCalls(t *testing.T) {
	s := newSwappable(t, nil, noGET)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "s", URL: s.srv.URL}}, nil)
	cs := connectMemory(t, p, nil)
	s.restart(nil, noGET)
	const n = 8
	errc := make(chan error, n)
	for range n {
		go func() { errc <- callTool(context.Background(), cs, "s__touch") }()
	}
	var failed []error
	for range n {
		if err := <-errc; err != nil {
			failed = append(failed, err)
		}
	}
	st := p.live["s"].d.sup.status()
	calls, results, bad := callEntries(t, l)
	t.Logf("%d of %d failed, %d ran, restarts %d; log: %d call, %d call.result (%d failed)", len(failed), n, s.ran.Load(), st.restarts, calls, results, bad)
	if len(failed) > 0 || s.ran.Load() != n {
		t.Errorf("%d of %d calls failed, %d ran: %v", len(failed), n, s.ran.Load(), failed)
	}
	if calls != n || results != n || bad != 0 {
		t.Errorf("log: %d call, %d call.result (%d failed), want %d, %d (0 failed)", calls, results, bad, n, n)
	}
	if st.restarts > maxSessionRenewals {
		t.Errorf("the session was renewed %d times for %d calls that found it gone together", st.restarts, n)
	}
}

// TestHTTPSessionForgottenRead: a resources/read after the server forgot
// the proxy's session (restarted behind its URL; 405 to GET, so nothing
// else notices) is answered 404 and did not run; like a call, it should
// be carried to a new session (its resource.read entry is written after
// the answer, so nothing is recorded twice).
func TestHTTPSessionForgottenRead(t *testing.T) {
	var h atomic.Pointer[http.Handler]
	var read atomic.Int64
	restart := func() {
		srv := mcp.NewServer(&mcp.Implementation{Name: "r", Version: "1"}, nil)
		srv.AddResource(&mcp.Resource{URI: "test://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			read.Add(1)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://a", Text: "x"}}}, nil
		})
		hh := noGET(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		h.Store(&hh)
	}
	restart()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(down.Close)
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "r", URL: down.URL}}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	res, err := cs.ListResources(ctx, nil)
	if err != nil || len(res.Resources) != 1 {
		t.Fatalf("listing: %v", err)
	}
	const n = 3
	var failed []error
	for range n {
		restart()
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
			failed = append(failed, err)
		}
	}
	t.Logf("%d of %d reads after a restart failed, %d ran", len(failed), n, read.Load())
	if len(failed) > 0 {
		t.Errorf("%d of %d reads after the server forgot the session failed: %v", len(failed), n, failed)
	}
}
