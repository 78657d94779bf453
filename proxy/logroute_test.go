package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// addLogs gives the fixture (run with fixtureEnv "logs") two tools that
// send a log message (level info, logger "fixture", data their text
// argument) once the file at their argument "when" exists: "log" during
// its call, which then waits for the file at "until"; "log_later" after
// its call, which answers at once, so that the message comes while no
// call is in progress. stdio carries no tie to a call: the proxy sees
// both kinds alike.
func addLogs(s *mcp.Server) {
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"when":{"type":"string"},"until":{"type":"string"}}}`)
	type args struct{ Text, When, Until string }
	parse := func(req *mcp.CallToolRequest) args {
		var a args
		json.Unmarshal(req.Params.Arguments, &a)
		return a
	}
	logWhen := func(ctx context.Context, ss *mcp.ServerSession, a args) error {
		if a.When != "" {
			if err := waitForFile(ctx, a.When); err != nil {
				return err
			}
		}
		return ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "fixture", Data: a.Text})
	}
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a := parse(req)
		if err := logWhen(ctx, req.Session, a); err != nil {
			return nil, err
		}
		if a.Until != "" {
			if err := waitForFile(ctx, a.Until); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "log_later", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		go logWhen(context.Background(), req.Session, parse(req))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "will log"}}}, nil
	})
}

// A logClient is a front session and the data of the log messages it
// received.
type logClient struct {
	name string
	cs   *mcp.ClientSession
	cl   *clientLog
	got  []string
}

// take moves what reached c since into got, and reports whether text did.
func (c *logClient) take(t *testing.T, text string) bool {
	t.Helper()
	for {
		select {
		case m := <-c.cl.logs:
			if m.Logger != "fx/fixture" {
				t.Errorf("%s got a log message with logger %q, want fx/fixture", c.name, m.Logger)
			}
			s, _ := m.Data.(string)
			c.got = append(c.got, s)
		default:
			return slices.Contains(c.got, text)
		}
	}
}

// A logRig is a proxy in front of the fixture's "logs" tools (server fx)
// that logs at debug level, and its clients.
type logRig struct {
	t        *testing.T
	p        *Proxy
	logs     *proctest.Buffer
	fx       *downstream
	dir      string
	gates    int // files made for the fixture's tools so far
	withheld int // messages the proxy said it withheld so far
	clients  []*logClient
}

// withheldLine is what the proxy's line about a withheld message says.
const withheldLine = "concerns no one caller"

func newLogRig(t *testing.T) *logRig {
	r := &logRig{t: t, logs: &proctest.Buffer{}, dir: t.TempDir()}
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "logs"
	r.p = startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	waitRouted(t, r.p, "fx__log", "fx__log_later", "fx__wait_file")
	for _, d := range r.p.downstreams() {
		if d.cfg.ID == "fx" {
			r.fx = d
		}
	}
	return r
}

// connectHTTP connects a client over HTTP with token, at log level debug.
func (r *logRig) connectHTTP(name, front, token string) *logClient {
	cl := newClientLog()
	return r.add(name, fastSession(r.t, r.p, connectHTTPAs(r.t, front, token, "2025-11-25", cl)), cl)
}

// connectMemory connects a client as the stdio front does, at log level
// debug; its actor is the one Options.Actor gives.
func (r *logRig) connectMemory(name string) *logClient {
	cl := newClientLog()
	return r.add(name, connectMemory(r.t, r.p, cl), cl)
}

func (r *logRig) add(name string, cs *mcp.ClientSession, cl *clientLog) *logClient {
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		r.t.Fatal(err)
	}
	c := &logClient{name: name, cs: cs, cl: cl}
	r.clients = append(r.clients, c)
	return c
}

// gate returns the path of a file the fixture's tools can wait for, and
// a function that creates it.
func (r *logRig) gate() (string, func()) {
	r.gates++
	path := filepath.Join(r.dir, fmt.Sprint("gate", r.gates))
	return path, func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
}

// call makes a call of c to the fixture's tool, in the background.
func (r *logRig) call(c *logClient, tool string, args map[string]any) chan error {
	done := make(chan error, 1)
	go func() {
		res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__" + tool, Arguments: args})
		if err == nil && res.IsError {
			err = fmt.Errorf("the call failed: %s", textOf(res))
		}
		done <- err
	}()
	return done
}

func (r *logRig) finished(calls ...chan error) {
	r.t.Helper()
	for _, c := range calls {
		if err := <-c; err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *logRig) inProgress(n int) {
	r.t.Helper()
	waitFor(r.t, fmt.Sprintf("%d calls in progress on fx", n), func() bool { return r.fx.calls.count() == n })
}

// duringCalls has the server log text during a call of by, while those of
// also are in progress too, and then checks where it went.
func (r *logRig) duringCalls(text string, by *logClient, also []*logClient, then func(text string)) {
	r.t.Helper()
	when, logNow := r.gate()
	until, release := r.gate()
	calls := []chan error{r.call(by, "log", map[string]any{"text": text, "when": when, "until": until})}
	for _, c := range also {
		calls = append(calls, r.call(c, "wait_file", map[string]any{"path": until}))
	}
	r.inProgress(len(calls))
	logNow()
	then(text)
	release()
	r.finished(calls...)
}

// outsideCalls has the server log text while no call is in progress (by
// asks for it), and then checks where it went.
func (r *logRig) outsideCalls(text string, by *logClient, then func(text string)) {
	r.t.Helper()
	when, logNow := r.gate()
	r.finished(r.call(by, "log_later", map[string]any{"text": text, "when": when}))
	r.inProgress(0)
	logNow()
	then(text)
}

// reach returns a check that text reaches each of to.
func (r *logRig) reach(to ...*logClient) func(text string) {
	return func(text string) {
		r.t.Helper()
		for _, c := range to {
			waitFor(r.t, fmt.Sprintf("%q reaching %s", text, c.name), func() bool { return c.take(r.t, text) })
		}
	}
}

// withhold checks that the proxy says it kept text from everyone, and
// that no client got it first.
func (r *logRig) withhold(text string) {
	r.t.Helper()
	waitFor(r.t, fmt.Sprintf("the proxy to withhold %q", text), func() bool {
		for _, c := range r.clients {
			if c.take(r.t, text) {
				r.t.Fatalf("%s got %q, which no one actor's call explains", c.name, text)
			}
		}
		return len(linesWith(r.logs, withheldLine)) > r.withheld
	})
	r.withheld++
}

// check has each client's own call log a last message, which comes after
// anything sent to it before, and then compares what each got with want
// (client name -> messages, the last ones aside).
func (r *logRig) check(want map[string][]string) {
	r.t.Helper()
	for _, c := range r.clients {
		r.duringCalls("last, to "+c.name, c, nil, r.reach(c))
		w := append(slices.Clone(want[c.name]), "last, to "+c.name)
		if got := slices.Sorted(slices.Values(c.got)); !slices.Equal(got, slices.Sorted(slices.Values(w))) {
			r.t.Errorf("%s got %q, want %q", c.name, c.got, w)
		}
	}
}

// TestServerLogsStayWithTheirActor: a downstream server shared by the
// sessions of two actors (alice, bob) sends log messages the proxy cannot
// tie to a call's stream (stdio). One sent while one session has calls in
// progress goes to it; while sessions of one actor have calls in
// progress, to those; with none in progress, to every session if all are
// one actor's. Otherwise (calls of alice and bob, or none while both are
// connected) it goes to no one, and the proxy says so at debug level
// without the message's data. Every message went to every session when it
// could not be tied to one, so bob read what the server logged while
// serving alice.
func TestServerLogsStayWithTheirActor(t *testing.T) {
	r := newLogRig(t)
	front := serveTokens(t, r.p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	a1, a2 := r.connectHTTP("alice 1", front, testToken), r.connectHTTP("alice 2", front, testToken)
	r.outsideCalls("server-wide, alice alone", a1, r.reach(a1, a2))
	r.duringCalls("during two calls of alice", a1, []*logClient{a2}, r.reach(a1, a2))

	b := r.connectHTTP("bob", front, "bobs-token")
	r.duringCalls("during a call of alice 1", a1, nil, r.reach(a1))
	r.duringCalls("during two calls of alice, bob idle", a1, []*logClient{a2}, r.reach(a1, a2))
	r.outsideCalls("server-wide, alice and bob connected", b, r.withhold)
	r.duringCalls("during calls of alice and bob", a1, []*logClient{b}, r.withhold)
	r.check(map[string][]string{
		a1.name: {"server-wide, alice alone", "during two calls of alice", "during a call of alice 1", "during two calls of alice, bob idle"},
		a2.name: {"server-wide, alice alone", "during two calls of alice", "during two calls of alice, bob idle"},
	})

	lines := linesWith(r.logs, withheldLine)
	if len(lines) != 2 {
		t.Fatalf("%d lines saying a message was withheld, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		for _, want := range []string{"level=DEBUG", "server=fx", "message_level=info", "logger=fx/fixture", "actors=2"} {
			if !strings.Contains(l, want) {
				t.Errorf("line %q lacks %s", l, want)
			}
		}
		if strings.Contains(l, "alice and bob") {
			t.Errorf("line %q holds the message's data", l)
		}
	}
}

// TestServerLogsReachTheOneActor: a stdio client's session, whose actor
// is the one Options.Actor gives its calls, and an HTTP session of the
// same actor both get the server's messages that no call explains, and
// those sent during calls of both.
func TestServerLogsReachTheOneActor(t *testing.T) {
	r := newLogRig(t)
	front := serveTokens(t, r.p, map[string]string{testToken: "test-actor"})
	s, h := r.connectMemory("stdio"), r.connectHTTP("http", front, testToken)
	r.outsideCalls("server-wide", h, r.reach(s, h))
	r.duringCalls("during calls of both", s, []*logClient{h}, r.reach(s, h))
	r.check(map[string][]string{
		s.name: {"server-wide", "during calls of both"},
		h.name: {"server-wide", "during calls of both"},
	})
	if lines := linesWith(r.logs, withheldLine); len(lines) > 0 {
		t.Errorf("the proxy withheld messages from one actor's sessions:\n%s", strings.Join(lines, "\n"))
	}
}

// TestServerLogsBesideASessionlessRequest: a 2026-07-28 request held open
// on the front (a client's subscriptions/listen, served by the SDK in a
// session of its own, which no initialize gave an actor) is its token's
// actor's. A server's message that no call explains reaches alice's
// session while her listen is open beside it, and is withheld once bob's
// is open too. The listen's session had no actor the proxy could tell, so
// the message was withheld beside alice's own listen.
func TestServerLogsBesideASessionlessRequest(t *testing.T) {
	r := newLogRig(t)
	front := serveTokens(t, r.p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	a := r.connectHTTP("alice", front, testToken)
	listening(t, front, testToken)
	r.outsideCalls("server-wide, alice's listen open", a, r.reach(a))
	listening(t, front, "bobs-token")
	r.outsideCalls("server-wide, bob's listen open too", a, r.withhold)
	r.check(map[string][]string{a.name: {"server-wide, alice's listen open"}})
}

// listening connects a 2026-07-28 client with token, and returns once the
// front acknowledged the subscriptions/listen go-sdk's client opens for
// tool list changes.
func listening(t *testing.T, front, token string) {
	t.Helper()
	acked := make(chan struct{}, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				select {
				case acked <- struct{}{}:
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	tr := &mcp.StreamableClientTransport{Endpoint: front, HTTPClient: &http.Client{Transport: &bearer{token, http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: statelessProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	select {
	case <-acked:
	case <-time.After(10 * time.Second):
		t.Fatal("the front never acknowledged the listen")
	}
}
