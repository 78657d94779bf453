package proxy

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// bridgeClient is a 2025-11-25 client that answers elicitation (a name
// in the first round of a question, a colour in the second), sampling
// and roots, and keeps the log messages it gets.
func bridgeClient(name string, logs chan<- string) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		// Capabilities nil: roots, and sampling and elicitation for the handlers.
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if strings.Contains(req.Params.Message, "context") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"context": "the test"}}, nil
			}
			if strings.Contains(req.Params.Message, "color") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "green"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Hello"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case logs <- req.Params.Data.(string):
			default:
			}
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	return c
}

// legsOf returns the call entries of tool in the log, in order, with the
// index of each one's call.result.
func legsOf(t *testing.T, l *testLog, tool, client string) (calls []*log.CallEntry, results []uint64) {
	t.Helper()
	byCall := map[uint64]int{}
	for i := uint64(1); i < l.size(t); i++ {
		e, err := log.ParseEntry(l.entry(t, i))
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case log.KindCall:
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			if c.Tool == tool && c.Client != nil && c.Client.Name == client {
				byCall[i] = len(calls)
				calls = append(calls, c)
				results = append(results, 0)
			}
		case log.KindCallResult:
			r, err := log.ParseCallResult(e)
			if err != nil {
				t.Fatal(err)
			}
			if k, ok := byCall[r.Call]; ok {
				results[k] = i
			}
		}
	}
	return calls, results
}

// checkLegs checks that client's call of tool is n legs in the log, each
// with its call.result, each later one continuing the one before.
func checkLegs(t *testing.T, l *testLog, tool, client, protocol string, n int) {
	t.Helper()
	calls, results := legsOf(t, l, tool, client)
	if len(calls) != n {
		t.Fatalf("%s by %s: %d call entries, want one per leg (%d)", tool, client, len(calls), n)
	}
	for k, c := range calls {
		if results[k] == 0 {
			t.Errorf("%s leg %d has no call.result", tool, k+1)
		}
		if c.ProtocolVersion != protocol {
			t.Errorf("%s leg %d: protocol %q, want %q", tool, k+1, c.ProtocolVersion, protocol)
		}
		var prev uint64
		if k > 0 {
			prev = results[k-1]
		}
		checkContinues(t, tool, k, c.Continues, c.InputResponsesSHA256, prev)
	}
}

// checkContinues checks leg k (from 0) of what: the first continues
// nothing, a later one the entry prev (of the leg before) with the hash
// of its answers.
func checkContinues(t *testing.T, what string, k int, continues uint64, inputs string, prev uint64) {
	t.Helper()
	switch {
	case k == 0 && (continues != 0 || inputs != ""):
		t.Errorf("%s first leg continues %d with inputs %q", what, continues, inputs)
	case k > 0 && continues != prev:
		t.Errorf("%s leg %d continues %d, want the previous leg's %d", what, k+1, continues, prev)
	case k > 0 && len(inputs) != 64:
		t.Errorf("%s leg %d: input_responses_sha256 %q", what, k+1, inputs)
	}
}

// TestBridgeInputRequiredForOlderClient: a stdio server spoken to in
// 2026-07-28 only (go-sdk's everything-server, protocol pinned) asks for
// input with input_required results; a 2025-11-25 client, which knows no
// such result, gets the server's questions as elicitation, sampling and
// roots requests during its call and then the server's answer, as it
// would from the server directly. Each leg is in the log: a call entry
// before it went to the server (the later ones naming the call.result
// they continue and the hash of the answers they carry) and its
// call.result. The client's log level reaches the server with each call.
func TestBridgeInputRequiredForOlderClient(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}, Protocol: statelessProtocol}}, nil)
	if !p.downstreams()[0].stateless() {
		t.Fatal("the pinned server's session is not 2026-07-28")
	}
	logs := make(chan string, 16)
	ctx := context.Background()
	cs := connectInMemory(t, p, bridgeClient("older-client", logs))

	call := func(tool string) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__" + tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError || res.NeedsInput() {
			t.Fatalf("%s: %s (error %v, needs input %v)", tool, textOf(res), res.IsError, res.NeedsInput())
		}
		if metaReceipt(res.Meta) == "" {
			t.Fatalf("%s: no receipt", tool)
		}
		return textOf(res)
	}
	if got, want := call("test_input_required_result_multi_round"), "Multi-round complete: Ada likes green"; got != want {
		t.Errorf("multi-round: %q, want %q", got, want)
	}
	if got := call("test_input_required_result_multiple_inputs"); got != "Hello Ada — 1 root(s) visible" {
		t.Errorf("multiple inputs in one round: %q", got)
	}

	for tool, n := range map[string]int{"test_input_required_result_multi_round": 3, "test_input_required_result_multiple_inputs": 2} {
		checkLegs(t, l, tool, "older-client", "2025-11-25", n)
	}

	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go__test_input_required_result_prompt"})
	if err != nil {
		t.Fatalf("prompts/get that asks for input: %v", err)
	}
	if len(pr.Messages) != 1 || fmt.Sprint(pr.Messages[0].Content.(*mcp.TextContent).Text) != "Context: the test" {
		t.Errorf("prompts/get that asks for input: %s", mustJSON(pr))
	}

	// The server judges what the client can give, not what the proxy can:
	// a client that declared nothing is asked nothing.
	bare := connectInMemory(t, p, mcp.NewClient(&mcp.Implementation{Name: "bare-client", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}))
	res, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_input_required_result_capabilities", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != "No declared client capability supports an in-band input request" {
		t.Errorf("a client without capabilities: %q", got)
	}
	if got := call("test_input_required_result_capabilities"); got != "Capability-aware input requests fulfilled" {
		t.Errorf("a client with them: %q", got)
	}

	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	call("test_tool_with_logging")
	select {
	case m := <-logs:
		if m != "Tool execution started" {
			t.Errorf("first log message %q", m)
		}
	case <-time.After(30 * time.Second):
		t.Error("no log message reached the client that set its level")
	}
}

// TestSessionPerRevision: a stdio server that speaks both revisions
// (go-sdk's everything-server) serves each client in the client's own. A
// 2026-07-28 client's call starts a second session to it in that
// revision, which passes the server's input_required results through;
// the client's retries are legs of the call in the log, each tied to the
// result it answers. A 2025-11-25 client's call stays on the first
// session, where the server may still ask the client itself during the
// call (test_elicitation does: on a 2026-07-28 session go-sdk refuses
// that, "cannot be sent while serving a request on protocol version
// 2026-07-28").
func TestSessionPerRevision(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, nil)
	d := p.downstreams()[0]
	if d.stateless() {
		t.Fatal("a stdio server's first session is 2026-07-28; want 2025-11-25")
	}
	tr := &mcp.StreamableClientTransport{Endpoint: serveHTTP(t, p), HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}
	newer, err := bridgeClient("newer-client", make(chan string, 16)).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { newer.Close() })
	if v := newer.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the newer client speaks %s", v)
	}
	ctx := context.Background()
	// The SDK's client answers input_required results itself and retries.
	res, err := newer.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_input_required_result_multi_round", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("multi-round from a 2026-07-28 client: %v", err)
	}
	if res.IsError {
		t.Fatalf("multi-round from a 2026-07-28 client: %s", textOf(res))
	}
	if textOf(res) != "Multi-round complete: Ada likes green" {
		t.Errorf("multi-round from a 2026-07-28 client: %q", textOf(res))
	}
	checkLegs(t, l, "test_input_required_result_multi_round", "newer-client", statelessProtocol, 3)
	sup, ok := d.newer.start(d)
	if !ok {
		t.Fatal("no newer session")
	}
	if cs, err := sup.session(); err != nil || !sessionStateless(cs) {
		t.Fatalf("the newer session: %v", err)
	}
	if d.stateless() {
		t.Error("the first session became 2026-07-28")
	}
	if h := d.health(); h["protocol_version"] != "2025-11-25" || fmt.Sprint(h["newer_session"]) == "<nil>" ||
		h["newer_session"].(map[string]any)["protocol_version"] != statelessProtocol {
		t.Errorf("provlog__status of the server: %v", h)
	}

	older := connectMemory(t, p, nil)
	res, err = older.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_elicitation", Arguments: map[string]any{"message": "who?"}})
	if err != nil {
		t.Fatalf("test_elicitation from a 2025-11-25 client: %v", err)
	}
	if res.IsError || !strings.Contains(textOf(res), "action=accept") {
		t.Fatalf("test_elicitation from a 2025-11-25 client: %q", textOf(res))
	}
}

// TestNewerClientOnOlderServer: a stdio server that speaks no revision
// newer than 2025-11-25 (npm's server-everything) is asked once for a
// newer session when a 2026-07-28 client calls it, answers with its own,
// and serves that client on its one session from then on.
func TestNewerClientOnOlderServer(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", Command: everythingJS(t, "stdio")}}, nil)
	newer := connectHTTP(t, serveHTTP(t, p), "", nil)
	if v := newer.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the newer client speaks %s", v)
	}
	for range 2 {
		res, err := newer.CallTool(context.Background(), &mcp.CallToolParams{Name: "ev__echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(res); got != "Echo: hi" {
			t.Fatalf("echo: %q", got)
		}
	}
	d := p.downstreams()[0]
	if !d.newer.isRefused() {
		t.Error("the server was not found to speak no newer revision")
	}
	if h := d.health(); h["newer_session"] != nil {
		t.Errorf("provlog__status reports a newer session: %v", h["newer_session"])
	}
}

// TestNewerSessionThatCannotStart: a stdio server whose second process
// cannot start (here: it takes a lock the first one holds) leaves the
// 2026-07-28 clients on its one session, which serves them as before; the
// newer session is reported down.
func TestNewerSessionThatCannotStart(t *testing.T) {
	flock, _ := exec.LookPath("flock") // util-linux, in every Debian image
	flock = need(t, "flock(1)", flock)
	l := newTestLog(t)
	lock := filepath.Join(t.TempDir(), "lock")
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{flock, "-n", lock, goEverything(t)}}}, nil)
	newer := connectHTTP(t, serveHTTP(t, p), "", nil)
	res, err := newer.CallTool(context.Background(), &mcp.CallToolParams{Name: "go__test_simple_text", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got != "This is a simple text response for testing." {
		t.Errorf("a 2026-07-28 client's call: %q", got)
	}
	h := p.downstreams()[0].health()
	ns, _ := h["newer_session"].(map[string]any)
	if ns == nil || ns["state"] == StateUp || ns["last_error"] == nil {
		t.Errorf("provlog__status: newer session %v, want it reported not up, with its error", h["newer_session"])
	}
}

// TestRetriesTie: a 2026-07-28 client's retry is tied to the one
// input_required result of the same call with its requestState; two alike
// leave it untied, a retry is tied once, and the oldest are forgotten
// beyond the bound.
func TestRetriesTie(t *testing.T) {
	leg := func(args string, result uint64) *call {
		return &call{actor: "a", server: "s", tool: "t", args: log.CanonicalJSON(args), resultIndex: result, secrets: &callSecrets{list: []string{"s-" + args}}}
	}
	var r retries
	r.note(leg(`{"q":1}`, 10), "st")
	r.note(leg(`{"q":2}`, 20), "st")
	r.note(leg(`{"q":2}`, 30), "st") // the same call made twice at once
	r.note(leg(`{"q":3}`, 40), "")
	for _, tc := range []struct {
		args, state string
		want        uint64
	}{
		{`{"q":1}`, "other", 0}, // another requestState (tampered, or another call's)
		{`{"q":1}`, "st", 10},
		{`{"q":1}`, "st", 0}, // tied once
		{`{"q":2}`, "st", 0}, // two alike: no telling
		{`{"q":3}`, "", 40},
		{`{"q":4}`, "", 0},
	} {
		got, secrets := r.take(leg(tc.args, 0), tc.state)
		if got != tc.want || (secrets != nil) != (tc.want != 0) {
			t.Errorf("retry of %s with state %q: continues %d (secrets %v), want %d", tc.args, tc.state, got, secrets, tc.want)
		}
		if secrets != nil && !slices.Equal(secrets.all(), []string{"s-" + tc.args}) {
			t.Errorf("retry of %s: inherits secrets %q, want the noted leg's", tc.args, secrets.all())
		}
	}
	// A retry by another client (log.Audit would refuse the tie) is not tied.
	cl := leg(`{"q":5}`, 50)
	cl.client = &mcp.Implementation{Name: "one", Version: "1"}
	r.note(cl, "st")
	other := leg(`{"q":5}`, 0)
	other.client = &mcp.Implementation{Name: "two", Version: "1"}
	if got, _ := r.take(other, "st"); got != 0 {
		t.Errorf("retry by another client: continues %d, want 0", got)
	}
	if got, _ := r.take(cl, "st"); got != 50 {
		t.Errorf("retry by the same client: continues %d, want 50", got)
	}
	for i := range maxRetryWaits + 1 {
		r.note(leg(fmt.Sprintf(`{"n":%d}`, i), uint64(100+i)), "")
	}
	if got, _ := r.take(leg(`{"n":0}`, 0), ""); got != 0 {
		t.Errorf("the oldest beyond the bound: continues %d, want it forgotten", got)
	}
	if got, _ := r.take(leg(fmt.Sprintf(`{"n":%d}`, maxRetryWaits), 0), ""); got != 100+maxRetryWaits {
		t.Errorf("the newest: continues %d", got)
	}
	// Each actor holds its share, and the bound takes from the actor
	// holding the most: five actors' 1,024 each leave alice's one.
	alice := leg(`{"alice":1}`, 7)
	alice.actor = "alice"
	r.note(alice, "st")
	for a := range 5 {
		for i := range maxRetryWaitsPerActor + 1 {
			c := leg(fmt.Sprintf(`{"n":%d}`, i), 1)
			c.actor = fmt.Sprint("m", a)
			r.note(c, "")
		}
	}
	if len(r.m) > maxRetryWaits {
		t.Errorf("%d results noted, beyond the bound %d", len(r.m), maxRetryWaits)
	}
	for a, keys := range r.byActor {
		if len(keys) > maxRetryWaitsPerActor {
			t.Errorf("actor %s holds %d results, beyond its share %d", a, len(keys), maxRetryWaitsPerActor)
		}
	}
	if got, _ := r.take(alice, "st"); got != 7 {
		t.Errorf("alice's retry after five others' shares: continues %d, want 7", got)
	}
}
