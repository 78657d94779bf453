package proxy

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/provlog/provlog/log"
)

// tracedProxy starts a proxy of l, tracing into the span recorder it
// returns, with the metaEchoServer "down".
func tracedProxy(t *testing.T, l *testLog) (*Proxy, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return startProxy(t, l, []ServerConfig{{ID: "down", URL: metaEchoServer(t)}}, func(o *Options) { o.Tracer = tp.Tracer("provlog") }), sr
}

// metaEchoServer is a streamable HTTP MCP server (go-sdk, in this
// process) whose tool "meta" answers with the traceparent its request
// carried, and whose tool "fails" answers with isError.
func metaEchoServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "meta-echo", Version: "0.0.1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "meta", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tp}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fails", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "echo://meta", Name: "meta"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "echo://meta", Text: tp}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "meta"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: tp}}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTraces: with a Tracer, a tools/call on either front path is one
// SERVER span that continues the client's traceparent from _meta, carries
// the MCP semantic-convention attributes and the call entry's index and
// leaf hash, has a child span per durable append, and is the parent the
// downstream server sees.
func TestTraces(t *testing.T) {
	l := newTestLog(t)
	p, sr := tracedProxy(t, l)
	front := serveHTTP(t, p)
	ctx := context.Background()

	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		name     string
		cs       func() *mcp.ClientSession
		fast     bool
		http     bool
		protocol string
	}{
		{"SDK", func() *mcp.ClientSession { return connectMemory(t, p, nil) }, false, false, "2025-11-25"},
		{"fast HTTP", func() *mcp.ClientSession { return fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil)) }, true, true, "2025-11-25"},
		{"stateless HTTP", func() *mcp.ClientSession { return connectHTTP(t, front, statelessProtocol, nil) }, false, true, statelessProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.cs()
			before := len(sr.Ended())
			fastBefore := p.fastCalls.Load()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "down__meta", Arguments: map[string]any{},
				Meta: mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			if got := p.fastCalls.Load() - fastBefore; (got == 1) != tc.fast {
				t.Fatalf("%d calls took the fast path", got)
			}
			call := spanNamed(t, sr.Ended()[before:], "tools/call down__meta")
			if call.SpanKind() != trace.SpanKindServer {
				t.Errorf("span kind %v, want server", call.SpanKind())
			}
			if got := call.SpanContext().TraceID().String(); got != parentTrace {
				t.Errorf("trace id %s, want the client's %s", got, parentTrace)
			}
			if got := call.Parent().SpanID().String(); got != parentSpan {
				t.Errorf("parent span %s, want the client's %s", got, parentSpan)
			}
			attrs := attrMap(call.Attributes())
			want := map[string]string{
				"mcp.method.name": "tools/call", "gen_ai.tool.name": "down__meta", "gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version": tc.protocol, "provlog.server": "down",
			}
			if tc.http {
				want["network.transport"] = "tcp"
				want["provlog.actor"] = testActor
			} else {
				want["network.transport"] = "pipe"
				want["provlog.actor"] = "test-actor"
			}
			for k, v := range want {
				if attrs[k] != v {
					t.Errorf("%s = %q, want %q", k, attrs[k], v)
				}
			}
			if attrs["jsonrpc.request.id"] == "" {
				t.Errorf("no jsonrpc.request.id")
			}
			if _, ok := attrs["error.type"]; ok {
				t.Errorf("error.type %q on a call that succeeded", attrs["error.type"])
			}
			if sid := attrs["mcp.session.id"]; tc.fast && (sid == "" || sid == cs.ID()) {
				t.Errorf("mcp.session.id %q: want a digest of the session id", sid)
			}

			// The span names the call entry the receipt's call.result cites.
			r, err := log.ParseReceipt([]byte(metaReceipt(res.Meta)))
			if err != nil {
				t.Fatal(err)
			}
			e, _ := log.ParseEntry(l.entry(t, r.Index))
			cr, err := log.ParseCallResult(e)
			if err != nil {
				t.Fatal(err)
			}
			if got := attrs["provlog.log.index"]; got != attribute.Int64Value(int64(cr.Call)).Emit() {
				t.Errorf("provlog.log.index %s, want the call entry %d", got, cr.Call)
			}
			if got, want := attrs["provlog.log.leaf_hash"], hex.EncodeToString(log.LeafHash(l.entry(t, cr.Call))); got != want {
				t.Errorf("provlog.log.leaf_hash %s, want %s", got, want)
			}

			// One child span per append, the call's then its result's.
			var appends []string
			for _, s := range sr.Ended()[before:] {
				if s.Parent().SpanID() == call.SpanContext().SpanID() {
					appends = append(appends, s.Name()+"@"+attrMap(s.Attributes())["provlog.log.index"])
				}
			}
			wantAppends := []string{"provlog append call@" + attrs["provlog.log.index"], "provlog append call.result@" + attribute.Int64Value(int64(r.Index)).Emit()}
			if mustJSON(appends) != mustJSON(wantAppends) {
				t.Errorf("child spans %v, want %v", appends, wantAppends)
			}

			// The downstream's parent is the proxy's span, in the same trace.
			wantTP := "00-" + parentTrace + "-" + call.SpanContext().SpanID().String() + "-01"
			if got := textOf(res); got != wantTP {
				t.Errorf("downstream saw traceparent %q, want %q", got, wantTP)
			}
		})
	}

	t.Run("ToolError", func(t *testing.T) {
		cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		before := len(sr.Ended())
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "down__fails", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		s := spanNamed(t, sr.Ended()[before:], "tools/call down__fails")
		if got := attrMap(s.Attributes())["error.type"]; got != "tool_error" {
			t.Errorf("error.type %q, want tool_error", got)
		}
		if s.Parent().IsValid() {
			t.Errorf("a call without traceparent has parent %v, want a new trace", s.Parent())
		}
	})
}

// TestTracesOffCostNothing: without a Tracer the span helpers allocate
// nothing.
func TestTracesOffCostNothing(t *testing.T) {
	p := &Proxy{}
	c, r, meta, id := &call{}, &log.Receipt{}, mcp.Meta{}, json.RawMessage("1")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		cctx, span := p.startSpan(ctx, traceOp{method: "tools/call", target: "x__y", meta: meta, id: id})
		span.recorded(c)
		actx, end := p.appendSpan(cctx, log.KindCall)
		end(r, nil)
		p.injectTrace(actx, nil)
		span.end(c, nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call with tracing off, want 0", allocs)
	}
}

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var names []string
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
		names = append(names, s.Name())
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestTracesOtherRequests: resources/read, prompts/get and a tool of the
// sidecar's own that records (as the task tools do) each get a SERVER span
// in the client's trace, with the request id, carrying the index and leaf
// hash of the entry the receipt proves; a read's downstream request has
// the span as its parent. The provlog__ tools, which record nothing, get
// none. Over the in-memory pipe and over HTTP (the SDK's handler serves
// all of these there).
func TestTracesOtherRequests(t *testing.T) {
	l := newTestLog(t)
	p, sr := tracedProxy(t, l)
	p.Server().AddTool(&mcp.Tool{Name: "record_note", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := (&log.Entry{Kind: "note", Time: time.Now(), Actor: "x"}).Marshal()
		r, err := l.seq.Append(ctx, b)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}, Meta: mcp.Meta{ReceiptKey: r.String()}}, nil
	})
	front := serveHTTP(t, p)
	ctx := context.Background()
	const parentTrace, parentSpan = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	meta := func() mcp.Meta { return mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"} }

	for _, tc := range []struct {
		name, transport string
		cs              func() *mcp.ClientSession
	}{
		{"pipe", "pipe", func() *mcp.ClientSession { return connectMemory(t, p, nil) }},
		{"HTTP", "tcp", func() *mcp.ClientSession { return fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil)) }},
		{"HTTP 2026-07-28", "tcp", func() *mcp.ClientSession { return connectHTTP(t, front, statelessProtocol, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.cs()
			type request struct {
				span    string
				do      func() (receipt, downstream string, err error)
				attrs   map[string]string
				noEntry bool
			}
			for _, rq := range []request{
				{span: "resources/read", attrs: map[string]string{"mcp.resource.uri": "down+echo://meta"}, do: func() (string, string, error) {
					res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "down+echo://meta", Meta: meta()})
					if err != nil {
						return "", "", err
					}
					return metaReceipt(res.Meta), res.Contents[0].Text, nil
				}},
				{span: "prompts/get down__meta", attrs: map[string]string{"gen_ai.prompt.name": "down__meta"}, do: func() (string, string, error) {
					res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "down__meta", Meta: meta()})
					if err != nil {
						return "", "", err
					}
					return metaReceipt(res.Meta), res.Messages[0].Content.(*mcp.TextContent).Text, nil
				}},
				{span: "tools/call record_note", attrs: map[string]string{"gen_ai.tool.name": "record_note", "gen_ai.operation.name": "execute_tool"}, do: func() (string, string, error) {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "record_note", Arguments: map[string]any{}, Meta: meta()})
					if err != nil {
						return "", "", err
					}
					return metaReceipt(res.Meta), "", nil
				}},
			} {
				before := len(sr.Ended())
				receipt, down, err := rq.do()
				if err != nil {
					t.Fatalf("%s: %v", rq.span, err)
				}
				s := spanNamed(t, sr.Ended()[before:], rq.span)
				attrs := attrMap(s.Attributes())
				if s.SpanKind() != trace.SpanKindServer || s.SpanContext().TraceID().String() != parentTrace || s.Parent().SpanID().String() != parentSpan {
					t.Errorf("%s: kind %v, trace %s, parent %s: want a server span in the client's trace", rq.span, s.SpanKind(), s.SpanContext().TraceID(), s.Parent().SpanID())
				}
				r, err := log.ParseReceipt([]byte(receipt))
				if err != nil {
					t.Fatalf("%s: receipt: %v", rq.span, err)
				}
				rq.attrs["mcp.method.name"], rq.attrs["network.transport"] = strings.Fields(rq.span)[0], tc.transport
				rq.attrs["provlog.log.index"] = attribute.Int64Value(int64(r.Index)).Emit()
				rq.attrs["provlog.log.leaf_hash"] = hex.EncodeToString(log.LeafHash(l.entry(t, r.Index)))
				for k, v := range rq.attrs {
					if attrs[k] != v {
						t.Errorf("%s: %s = %q, want %q", rq.span, k, attrs[k], v)
					}
				}
				if attrs["jsonrpc.request.id"] == "" {
					t.Errorf("%s: no jsonrpc.request.id: %v", rq.span, attrs)
				}
				if rq.span != "tools/call record_note" {
					if want := "00-" + parentTrace + "-" + s.SpanContext().SpanID().String() + "-01"; down != want {
						t.Errorf("%s: downstream saw traceparent %q, want %q", rq.span, down, want)
					}
				}
			}
			before := len(sr.Ended())
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolStatus, Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			for _, s := range sr.Ended()[before:] {
				t.Errorf("span %q for provlog__status, which records nothing", s.Name())
			}
		})
	}
}

// TestTracesHTTPBatch: the messages of a JSON-RPC batch over HTTP (on a
// 2025-03-26 session, where the SDK serves batches) share one HTTP
// request; each traced one's span carries its own request id. Two that
// ask exactly the same thing get none, as nothing tells them apart.
func TestTracesHTTPBatch(t *testing.T) {
	l := newTestLog(t)
	p, sr := tracedProxy(t, l)
	front := serveHTTP(t, p)
	cs := connectHTTP(t, front, "2025-03-26", nil)
	batch := `[{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"down__meta","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":"twelve","method":"tools/call","params":{"name":"down__fails","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{"uri":"down+echo://meta"}},` +
		`{"jsonrpc":"2.0","id":14,"method":"prompts/get","params":{"name":"down__meta"}},` +
		`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"down__meta","arguments":{"same":1}}},` +
		`{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"down__meta","arguments":{"same":1}}},` +
		`{"jsonrpc":"2.0","id":17,"method":"ping"}]`
	req, _ := http.NewRequest(http.MethodPost, front, strings.NewReader(batch))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
	req.Header.Set("Authorization", "Bearer "+testToken)
	// A client's own use of the internal names is dropped.
	req.Header.Set(frontIDHeader, "999")
	req.Header.Set(frontBatchHeader, `{"x":1}`)
	before := len(sr.Ended())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, id := range []string{`"id":11`, `"id":"twelve"`, `"id":13`, `"id":14`, `"id":15`, `"id":16`, `"id":17`} {
		if !strings.Contains(string(body), id) {
			t.Errorf("HTTP %d %s: no answer with %s", resp.StatusCode, body, id)
		}
	}
	got := map[string][]string{}
	for _, s := range sr.Ended()[before:] {
		if s.SpanKind() == trace.SpanKindServer {
			got[s.Name()] = append(got[s.Name()], attrMap(s.Attributes())["jsonrpc.request.id"])
		}
	}
	want := map[string][]string{
		"tools/call down__meta":  {"", "", "11"}, // 15 and 16 ask the same
		"tools/call down__fails": {"twelve"},
		"resources/read":         {"13"},
		"prompts/get down__meta": {"14"},
	}
	for name := range got {
		slices.Sort(got[name])
	}
	if mustJSON(got) != mustJSON(want) {
		t.Errorf("server spans' request ids %v, want %v", got, want)
	}
}

// FuzzBatchIDs: for any body, the ids of a batch are a JSON object from
// keys to ids (or nothing), and a request decoded from one of its
// messages finds its own id there unless another asks the same.
func FuzzBatchIDs(f *testing.F) {
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[1]}}},{"id":"2","method":"prompts/get","params":{"name":"p"}}]`))
	f.Add([]byte(`[{"id":1,"method":"resources/read","params":null},{"id":2,"method":"tools/call","Params":{}}]`))
	f.Add([]byte(`[1,"x",{"id":null,"method":"tools/call"}]`))
	f.Add([]byte(`[{"id":"<&>","method":"tools/call","params":{"name":"a"}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := batchIDs(b)
		if out == "" {
			return
		}
		var ids map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &ids); err != nil {
			t.Fatalf("%q: ids %q are not a JSON object: %v", b, out, err)
		}
		var elems []json.RawMessage
		json.Unmarshal(b, &elems)
		for _, e := range elems {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if sdkDecode(e, &m) != nil || m.Method != "tools/call" || len(m.ID) == 0 || string(m.ID) == "null" {
				continue
			}
			var p *mcp.CallToolParamsRaw
			if len(m.Params) > 0 && sdkDecode(m.Params, &p) != nil {
				continue
			}
			req := &mcp.CallToolRequest{Params: p, Extra: &mcp.RequestExtra{Header: http.Header{frontBatchHeader: {out}}}}
			batchID("tools/call", req)
			got := req.Extra.Header.Get(frontIDHeader)
			if id := ids[requestKey("tools/call", p)]; string(id) != "null" && (got != string(id) || !bytes.Equal(id, m.ID)) {
				t.Fatalf("%q: message %s took id %q, want %s", b, e, got, id)
			}
		}
	})
}
