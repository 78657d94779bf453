package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// addAsks gives the fixture (run with fixtureEnv "asks") a prompt that
// asks (addAskingPrompt) and a tool "ask_twice" that, during the call,
// asks its client for a name (elicitation) and then for a greeting of it
// (sampling), and answers "NAME: GREETING" (askTwice); a prompt
// "ask_twice" and a resource "fixture:///ask_twice" do the same during
// the read. The tool and the prompt append what they got to the file
// their argument path names, one line each, so a test sees what reached
// the server.
func addAsks(s *mcp.Server) {
	schema := json.RawMessage(`{"type":"object","properties":{"username":{"type":"string"}},"required":["username"]}`)
	in := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	addAskingPrompt(s, schema)
	s.AddTool(&mcp.Tool{Name: "ask_twice", InputSchema: in}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct {
			Path string `json:"path"`
		}
		json.Unmarshal(req.Params.Arguments, &a)
		text, err := askTwice(ctx, req.Session, schema, a.Path)
		return &mcp.CallToolResult{IsError: err != nil, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	// The same asks during prompts/get and resources/read.
	s.AddPrompt(&mcp.Prompt{Name: "ask_twice", Arguments: []*mcp.PromptArgument{{Name: "path"}}}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		text, err := askTwice(ctx, req.Session, schema, req.Params.Arguments["path"])
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
	s.AddResource(&mcp.Resource{Name: "ask_twice", URI: "fixture:///ask_twice"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		text, err := askTwice(ctx, req.Session, schema, "")
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
	})
}

// askTwice asks the client of session for a name (elicitation) and then
// for a greeting of it (sampling), noting each answer in the file at path
// (if any), and returns "NAME: GREETING", or what failed.
func askTwice(ctx context.Context, session *mcp.ServerSession, schema json.RawMessage, path string) (string, error) {
	note := func(line string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if path != "" && err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
	er, err := session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: schema})
	if err != nil {
		note("elicitation failed")
		return "elicitation failed: " + err.Error(), err
	}
	name, _ := er.Content["username"].(string)
	note("elicited " + name)
	sr, err := session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 16,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + name}}}})
	if err != nil {
		note("sampling failed")
		return "sampling failed: " + err.Error(), err
	}
	note("sampled " + textOfContent(sr.Content))
	return name + ": " + textOfContent(sr.Content), nil
}

// addAsks' prompt "ask_name" asks for a name during prompts/get.
func addAskingPrompt(s *mcp.Server, schema json.RawMessage) {
	s.AddPrompt(&mcp.Prompt{Name: "ask_name"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		er, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		name, _ := er.Content["username"].(string)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello " + name}}}}, nil
	})
}

// askingFixture is the fixture with ask_twice, spoken to in 2025-11-25
// only.
func askingFixture(t *testing.T, id string) ServerConfig {
	cfg := fixtureServerConfig(t, id)
	cfg.Env[fixtureEnv], cfg.Protocol = "asks", "2025-11-25"
	return cfg
}

// handClient is a 2026-07-28 client that declares sampling and
// elicitation but makes its retries itself (the test's), with token.
func handClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "hand-client", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("not asked this way")
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return nil, fmt.Errorf("not asked this way")
		},
	})
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: &bearer{token, http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the hand client speaks %s", v)
	}
	return cs
}

func fileLines(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestParkForNewerClient: a 2026-07-28 client (go-sdk's, which answers
// input_required results itself and retries) calls a tool of a stdio
// server spoken to in 2025-11-25 only (the fixture, a real process),
// which asks for elicitation and then sampling during the call. The
// client gets each request as an input_required result, its retries
// reach the server's waiting requests, and it gets the server's answer;
// the call is three legs in the log, in order, each later one continuing
// the one before with the hash of its answers, and the log audits (the
// test log's cleanup runs log.Audit, which checks each leg's continues).
func TestParkForNewerClient(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	if p.downstreams()[0].stateless() {
		t.Fatal("the pinned server's session is 2026-07-28")
	}
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the client speaks %s", v)
	}
	seen := filepath.Join(t.TempDir(), "seen")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: map[string]any{"path": seen}})
	if err != nil {
		t.Fatalf("ask_twice: %v", err)
	}
	if got, want := textOf(res), "tester: sampled by the test client"; res.IsError || got != want {
		t.Fatalf("ask_twice: %q (error %v), want %q", got, res.IsError, want)
	}
	if got := fileLines(t, seen); got != "elicited tester\nsampled sampled by the test client" {
		t.Errorf("the server got %q", got)
	}
	if metaReceipt(res.Meta) == "" {
		t.Error("no receipt")
	}
	checkLegs(t, l, "ask_twice", "go-http-client", statelessProtocol, 3)
	calls, _ := legsOf(t, l, "ask_twice", "go-http-client")
	if calls[1].InputResponsesSHA256 == calls[2].InputResponsesSHA256 {
		t.Error("legs 2 and 3 carry other answers but one hash")
	}
	// The client's receipt is the last leg's call.result.
	if e, _ := l.checkReceipt(t, metaReceipt(res.Meta)); e == nil {
		t.Error("the receipt proves no call")
	}
	if w, n := p.parked.size(); w != 0 || n != 0 {
		t.Errorf("after the call: %d rounds waiting, %d calls parked", w, n)
	}
}

// TestParkStatefulHTTPServer: the same through a stateful streamable HTTP
// server of 2025-11-25 (go-sdk's everything-server), whose requests come
// on the call's own stream.
func TestParkStatefulHTTPServer(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "goh", URL: startGoEverythingHTTP(t), Protocol: "2025-11-25"}}, nil)
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	ctx := context.Background()
	for _, tc := range []struct{ tool, arg, want string }{{"test_elicitation", "message", "accept"}, {"test_sampling", "prompt", "sampled by the test client"}} {
		tool, want := tc.tool, tc.want
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "goh__" + tool, Arguments: map[string]any{tc.arg: "hi"}})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError || !strings.Contains(textOf(res), want) {
			t.Errorf("%s: %q (error %v), want it to hold %q", tool, textOf(res), res.IsError, want)
		}
		checkLegs(t, l, tool, "go-http-client", statelessProtocol, 2)
	}
}

// parkedRound calls ask_twice as cs (a hand client) and returns the
// input_required result it gets.
func parkedRound(t *testing.T, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: args})
	if err != nil {
		t.Fatalf("ask_twice: %v", err)
	}
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("ask_twice: %s, want one input request", mustJSON(res))
	}
	return res
}

// TestParkRetryChecks: a retry is taken only with a requestState the
// proxy issued for this actor's call of this tool with these arguments,
// once, with answers of the right kind; every other retry is refused with
// a JSON-RPC error, writes nothing and reaches no server, and the right
// retry still goes on after them.
func TestParkRetryChecks(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-mallory": "mallory"})
	alice, mallory := handClient(t, url, "tok-alice"), handClient(t, url, "tok-mallory")
	seen := filepath.Join(t.TempDir(), "seen")
	args := map[string]any{"path": seen}
	ctx := context.Background()

	first := parkedRound(t, alice, args)
	var id string
	for k, r := range first.InputRequests {
		if _, ok := r.(*mcp.ElicitParams); !ok {
			t.Fatalf("first round asks %T", r)
		}
		id = k
	}
	name := mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}}
	retry := func(cs *mcp.ClientSession, args map[string]any, answers mcp.InputResponseMap, state string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: args, InputResponses: answers, RequestState: state})
	}
	refused := func(what string, cs *mcp.ClientSession, args map[string]any, answers mcp.InputResponseMap, state string) {
		t.Helper()
		before, got := l.size(t), fileLines(t, seen)
		res, err := retry(cs, args, answers, state)
		if err == nil {
			t.Fatalf("%s: answered %s, want it refused", what, mustJSON(res))
		}
		if !strings.Contains(err.Error(), "nothing was forwarded") {
			t.Errorf("%s: %v", what, err)
		}
		if after := l.size(t); after != before {
			t.Errorf("%s: %d entries written", what, after-before)
		}
		if now := fileLines(t, seen); now != got {
			t.Errorf("%s: the server got %q", what, strings.TrimPrefix(now, got))
		}
	}
	refused("another actor's retry", mallory, args, name, first.RequestState)
	refused("an unknown requestState", alice, args, name, "provlog-park-"+strings.Repeat("A", 43))
	refused("no requestState", alice, args, name, "")
	refused("other arguments", alice, map[string]any{"path": seen + "2"}, name, first.RequestState)
	refused("an answer of another kind", alice, args, mcp.InputResponseMap{id: &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "x"}}}, first.RequestState)
	refused("an answer to another request", alice, args, mcp.InputResponseMap{id + "x": name[id]}, first.RequestState)
	if got := fileLines(t, seen); got != "" {
		t.Fatalf("before the right retry the server got %q", got)
	}

	second, err := retry(alice, args, name, first.RequestState)
	if err != nil {
		t.Fatalf("the right retry: %v", err)
	}
	if !second.NeedsInput() || len(second.InputRequests) != 1 || second.RequestState == first.RequestState {
		t.Fatalf("the right retry: %s, want the sampling round with a state of its own", mustJSON(second))
	}
	if got := fileLines(t, seen); got != "elicited Ada" {
		t.Fatalf("after the right retry the server got %q", got)
	}
	refused("a used requestState", alice, args, name, first.RequestState)
	var sid string
	for k, r := range second.InputRequests {
		if _, ok := r.(*mcp.CreateMessageWithToolsParams); !ok {
			t.Fatalf("second round asks %T", r)
		}
		sid = k
	}
	final, err := retry(alice, args, mcp.InputResponseMap{sid: &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Hi Ada"}}}, second.RequestState)
	if err != nil {
		t.Fatalf("the last retry: %v", err)
	}
	if final.NeedsInput() || final.IsError || textOf(final) != "Ada: Hi Ada" {
		t.Fatalf("the last retry: %s", mustJSON(final))
	}
	checkLegs(t, l, "ask_twice", "hand-client", statelessProtocol, 3)
	legsBy(t, l, "alice")
}

// legsBy checks that every leg in the log, of a call (its call and
// call.result entries) or a read (prompt.get, resource.read), is actor's:
// another actor's retry of a parked call or read wrote nothing.
func legsBy(t *testing.T, l *testLog, actor string) {
	t.Helper()
	for i := uint64(1); i < l.size(t); i++ {
		switch e := mustParse(t, l.entry(t, i)); e.Kind {
		case log.KindCall, log.KindCallResult, log.KindPromptGet, log.KindResourceRead:
			if e.Actor != actor {
				t.Errorf("entry %d (%s) by %q, want every leg by %q", i, e.Kind, e.Actor, actor)
			}
		}
	}
}

// TestParkTimeout: a parked call whose client does not come back within
// the timeout ends: the server's waiting request gets an error, a closing
// leg (continuing the last round, with no answers) records the server's
// outcome, and a late retry is refused with nothing forwarded.
func TestParkTimeout(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, func(o *Options) { o.ParkTimeout = 200 * time.Millisecond })
	cs := handClient(t, serveTokens(t, p, map[string]string{"tok": "alice"}), "tok")
	seen := filepath.Join(t.TempDir(), "seen")
	args := map[string]any{"path": seen}
	first := parkedRound(t, cs, args)
	var calls []*log.CallEntry
	var results []uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		calls, results = legsOf(t, l, "ask_twice", "hand-client")
		if len(calls) == 2 && results[1] != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no closing leg recorded: %s", mustJSON(calls))
		}
	}
	if c := calls[1]; c.Continues != results[0] || c.InputResponsesSHA256 != "" {
		t.Errorf("the closing leg continues %d with inputs %q, want %d and none", c.Continues, c.InputResponsesSHA256, results[0])
	}
	r, err := log.ParseCallResult(mustParse(t, l.entry(t, results[1])))
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError {
		t.Errorf("the closing leg's outcome: %s, want the server's error result", mustJSON(r))
	}
	if got := fileLines(t, seen); got != "elicitation failed" {
		t.Errorf("the server got %q", got)
	}
	lateRetryRefused(t, l, seen, func() error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: args, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{"1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "late"}}}})
		return err
	})
	if w, n := p.parked.size(); w != 0 || n != 0 {
		t.Errorf("after the timeout: %d rounds waiting, %d calls parked", w, n)
	}
}

// lateRetryRefused checks that retry, a client's retry after its parked
// round timed out, is refused as an unknown state, with nothing written
// to l and nothing forwarded (the fixture's file seen says what the
// server got).
func lateRetryRefused(t *testing.T, l *testLog, seen string, retry func() error) {
	t.Helper()
	before := l.size(t)
	if err := retry(); err == nil || !strings.Contains(err.Error(), "unknown, expired or used") {
		t.Errorf("a retry after the timeout: %v", err)
	}
	if l.size(t) != before || fileLines(t, seen) != "elicitation failed" {
		t.Error("a retry after the timeout wrote or forwarded something")
	}
}

// TestParkCap: beyond MaxParkedCalls a server's request is refused at
// once (the call goes on to the server's answer to that), and a parked
// call that ends makes room again.
func TestParkCap(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx"), askingFixture(t, "fy")}, func(o *Options) { o.MaxParkedCalls = 1 })
	cs := handClient(t, serveTokens(t, p, map[string]string{"tok": "alice"}), "tok")
	dir := t.TempDir()
	ctx := context.Background()
	first := parkedRound(t, cs, map[string]any{"path": filepath.Join(dir, "a")})
	// Another server, so that its request cannot be taken for the first call's.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fy__ask_twice", Arguments: map[string]any{"path": filepath.Join(dir, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput() || !res.IsError || !strings.Contains(textOf(res), "wait for their clients' input already") {
		t.Fatalf("a call beyond the cap: %s", mustJSON(res))
	}
	if _, n := p.parked.size(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
	var id string
	for k := range first.InputRequests {
		id = k
	}
	second, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: map[string]any{"path": filepath.Join(dir, "a")}, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "decline"}}})
	if err != nil || !second.NeedsInput() {
		t.Fatalf("the parked call's retry: %v %s", err, mustJSON(second))
	}
	for k := range second.InputRequests {
		id = k
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: map[string]any{"path": filepath.Join(dir, "a")}, RequestState: second.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "hello"}}}})
	if err != nil || res.IsError || textOf(res) != ": hello" {
		t.Fatalf("the parked call's last retry: %v %s", err, mustJSON(res))
	}
	if _, n := p.parked.size(); n != 0 {
		t.Errorf("%d calls parked after the end, want 0", n)
	}
	parkedRound(t, cs, map[string]any{"path": filepath.Join(dir, "b")}) // room again
}

// BenchmarkParkPath: a 2026-07-28 client's tools/call that asks nothing
// ("ok") of a stdio server on a 2025-11-25 session (the fixture), over
// HTTP: through the parked path (the call runs downstream on a goroutine
// of its own, in case the server asks) and, beside it, with parking off
// (the call made on the request's goroutine), for what parking costs a
// call that never parks.
//
//	go test ./proxy -run '^$' -bench ParkPath
func BenchmarkParkPath(b *testing.B) {
	for _, noPark := range []bool{false, true} {
		name := "park"
		if noPark {
			name = "nopark"
		}
		b.Run(name, func(b *testing.B) {
			l := newTestLog(b)
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			cfg := ServerConfig{ID: "fx", Command: []string{exe, "-test.run=^$"}, Env: map[string]string{fixtureEnv: "asks"}, Protocol: "2025-11-25"}
			p := startProxy(b, l, []ServerConfig{cfg}, nil)
			p.noPark = noPark
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			tr := &mcp.StreamableClientTransport{Endpoint: serveHTTP(b, p), HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}
			cs, err := c.Connect(context.Background(), tr, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cs.Close() })
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestServerRequestDuringRead: a server's request during a prompts/get
// (a 2025-11-25 server's elicitation) reaches the client that made the
// read, as one during a call does; with nothing else in flight it found
// no client, and with another session's call in flight it went to that
// session.
func TestServerRequestDuringRead(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	cs := connectMemory(t, p, nil)
	res, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fx__ask_name"})
	if err != nil {
		t.Fatalf("prompts/get that asks: %v", err)
	}
	if len(res.Messages) != 1 || textOfContent(res.Messages[0].Content) != "Hello tester" {
		t.Errorf("prompts/get that asks: %s", mustJSON(res))
	}
}

// TestCloseRecordsParkedRound: a round parked when the sidecar stops is
// closed before Close returns: its closing leg and the call's outcome are
// in the log, and no announced append is left open. The watch that
// closes it ran on a goroutine Close did not wait for, so the log was
// closed under it (the call then read as cut off by a crash; in the tests,
// "1 announced appends still open" now and then).
func TestCloseRecordsParkedRound(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	cs := handClient(t, serveTokens(t, p, map[string]string{"tok": "alice"}), "tok")
	parkedRound(t, cs, map[string]any{"path": filepath.Join(t.TempDir(), "seen")})
	p.Close()
	// Read at once, before anything else could finish a late write.
	open := l.seq.Stats().Expected
	calls, results := legsOf(t, l, "ask_twice", "hand-client")
	if open != 0 || len(calls) != 2 || results[1] == 0 {
		t.Fatalf("after Close: %d announced appends open, %d legs, results at %v; want 0, the first leg and its closing leg, both with results", open, len(calls), results)
	}
}
