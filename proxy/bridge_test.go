package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// bridgeClient is a 2025-11-25 client that answers elicitation (a name
// in the first round of a question, a colour in the second), sampling
// and roots, and keeps the log messages it gets.
func bridgeClient(logs chan<- string) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "older-client", Version: "1"}, &mcp.ClientOptions{
		// Capabilities nil: roots, and sampling and elicitation for the handlers.
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
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
func legsOf(t *testing.T, l *testLog, tool string) (calls []*log.CallEntry, results []uint64) {
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
			if c.Tool == tool {
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
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := p.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := bridgeClient(logs).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

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
		calls, results := legsOf(t, l, tool)
		if len(calls) != n {
			t.Fatalf("%s: %d call entries, want one per leg (%d)", tool, len(calls), n)
		}
		for k, c := range calls {
			if results[k] == 0 {
				t.Errorf("%s leg %d has no call.result", tool, k+1)
			}
			if c.ProtocolVersion != "2025-11-25" || c.Client == nil || c.Client.Name != "older-client" {
				t.Errorf("%s leg %d: client %+v, protocol %q", tool, k+1, c.Client, c.ProtocolVersion)
			}
			switch {
			case k == 0 && (c.Continues != 0 || c.InputResponsesSHA256 != ""):
				t.Errorf("%s first leg continues %d with inputs %q", tool, c.Continues, c.InputResponsesSHA256)
			case k > 0 && c.Continues != results[k-1]:
				t.Errorf("%s leg %d continues %d, want the previous leg's call.result %d", tool, k+1, c.Continues, results[k-1])
			case k > 0 && len(c.InputResponsesSHA256) != 64:
				t.Errorf("%s leg %d: input_responses_sha256 %q", tool, k+1, c.InputResponsesSHA256)
			}
		}
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
