package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/provlog/provlog/log"
)

// BenchmarkCallHTTP: one tools/call (a 1 KiB echo) through the proxy's
// HTTP front to a stateful streamable HTTP server, recorded in a memory
// log (so the store's cost is not in it; the sequencer's is). The client
// and the server run in this process too, so ns/op is not the proxy's
// alone: read -cpuprofile for that. The direct sub-benchmark calls the
// same server without the proxy, for the difference; proxied-otel is
// proxied with tracing on, for the spans' cost; the -32 ones make the
// calls from 32 sessions at once.
//
//	go test ./proxy -run '^$' -bench CallHTTP -cpuprofile /tmp/cpu.out
func BenchmarkCallHTTP(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + string(req.Params.Arguments)}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(down.Close)
	args := map[string]any{"message": strings.Repeat("x", 1024)}
	connect := benchSession
	call := func(b *testing.B, cs *mcp.ClientSession, tool string) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	// run makes b.N calls on the sessions, one at a time on each, all
	// sessions at once, and reports the process's CPU time per call
	// (cpu-ns/op: user and system, the goroutines of client and server
	// included), which a loaded machine stretches less than ns/op.
	run := func(b *testing.B, sessions []*mcp.ClientSession, tool string) {
		b.ReportAllocs()
		cpu := int64(proctest.CPU())
		if len(sessions) == 1 {
			for b.Loop() {
				call(b, sessions[0], tool)
			}
		} else {
			var next atomic.Int32
			b.SetParallelism((len(sessions) + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				cs := sessions[int(next.Add(1)-1)%len(sessions)]
				for pb.Next() {
					call(b, cs, tool)
				}
			})
		}
		b.ReportMetric(float64(int64(proctest.CPU())-cpu)/float64(b.N), "cpu-ns/op")
	}
	sessions := func(b *testing.B, n int, url string, p *Proxy) []*mcp.ClientSession {
		out := make([]*mcp.ClientSession, n)
		for i := range out {
			if out[i] = connect(b, url); p != nil {
				fastSession(b, p, out[i])
			}
		}
		return out
	}
	proxied := func(b *testing.B, clients int, opts func(*Options)) {
		l := newTestLog(b)
		p := startProxy(b, l, []ServerConfig{{ID: "e", URL: down.URL}}, opts)
		run(b, sessions(b, clients, serveHTTP(b, p), p), "e__echo")
		if p.fastCalls.Load() == 0 {
			b.Error("no call took the fast path")
		}
	}
	for _, clients := range []int{1, 32} {
		// 32 clients, each its own session (-32), as proxybench's A3 makes
		// them.
		suffix := ""
		if clients > 1 {
			suffix = "-" + strconv.Itoa(clients)
		}
		b.Run("direct"+suffix, func(b *testing.B) { run(b, sessions(b, clients, down.URL, nil), "echo") })
		b.Run("proxied"+suffix, func(b *testing.B) { proxied(b, clients, nil) })
		// The same without http1.go: the downstream POSTs on net/http's
		// client, as they go to https servers, for what http1.go buys alone.
		b.Run("proxied-nethttp"+suffix, func(b *testing.B) { proxied(b, clients, func(o *Options) { o.netHTTPOnly = true }) })
	}
	// With otel: as cmd configures it: every span batched and exported
	// over OTLP/HTTP (protobuf) to a receiver that reads and drops them.
	b.Run("proxied-otel", func(b *testing.B) {
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
		}))
		b.Cleanup(rcv.Close)
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		proxied(b, 1, func(o *Options) { o.Tracer = tp.Tracer("provlog") })
	})
}

// BenchmarkCallStdio: one tools/call (a 1 KiB echo) through the proxy's
// HTTP front to a stdio server (the fixture, its own process), recorded
// in a memory log. cpu-ns/op and allocs/op are this process's: the
// proxy's and its client's, the server's not; from 1 session and from 32
// at once.
//
//	go test ./proxy -run '^$' -bench CallStdio -cpuprofile /tmp/cpu.out
func BenchmarkCallStdio(b *testing.B) {
	args := map[string]any{"message": strings.Repeat("x", 1024)}
	for _, clients := range []int{1, 32} {
		b.Run("proxied-"+strconv.Itoa(clients), func(b *testing.B) {
			l := newTestLog(b)
			p := startProxy(b, l, []ServerConfig{fixtureServerConfig(b, "fx")}, nil)
			url := serveHTTP(b, p)
			sessions := make([]*mcp.ClientSession, clients)
			for i := range sessions {
				sessions[i] = fastSession(b, p, benchSession(b, url))
			}
			var next atomic.Int32
			b.ReportAllocs()
			cpu := int64(proctest.CPU())
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				cs := sessions[int(next.Add(1)-1)%len(sessions)]
				for pb.Next() {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: args})
					if err != nil || res.IsError || !strings.Contains(textOf(res), "Echo: {") {
						b.Fatal(err, res)
					}
				}
			})
			b.ReportMetric(float64(int64(proctest.CPU())-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCallSpans: what tracing adds to one proxied call by itself,
// without the call: the call's span with the MCP attributes, its two
// append spans and the traceparent for the downstream, ended and handed
// to the batch processor of an OTLP/HTTP exporter (off: no Tracer;
// otel-noexport: a batch processor whose exporter drops the spans, for
// the spans' making alone).
func BenchmarkCallSpans(b *testing.B) {
	c := &call{actor: "alice", server: "e", index: 7, entry: []byte(`{"kind":"call"}`)}
	r := &log.Receipt{Index: 8}
	id := json.RawMessage(`17`)
	run := func(b *testing.B, p *Proxy) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			meta := mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			cctx, span := p.startSpan(ctx, traceOp{method: "tools/call", target: "e__echo", meta: meta, session: "S3SS10N", protocol: "2025-11-25", id: id, transport: "tcp"})
			span.recorded(c)
			_, end := p.appendSpan(cctx, log.KindCall)
			end(r, nil)
			p.injectTrace(cctx, meta)
			_, end = p.appendSpan(cctx, log.KindCallResult)
			end(r, nil)
			span.end(c, nil)
		}
	}
	b.Run("off", func(b *testing.B) { run(b, &Proxy{}) })
	b.Run("otel-noexport", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		run(b, &Proxy{opts: Options{Tracer: tp.Tracer("provlog")}})
	})
	b.Run("otel", func(b *testing.B) {
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
		b.Cleanup(rcv.Close)
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		run(b, &Proxy{opts: Options{Tracer: tp.Tracer("provlog")}})
	})
}

// BenchmarkCallWire: BenchmarkCallHTTP's call with a client and a server
// that cost next to nothing, so that nearly all of the process's CPU time
// (cpu-ns/op) is the proxy's own. The sessions are opened by go-sdk's
// client and server as usual; then each call is a POST written by hand
// (net/http's client, keep-alive) whose answer is read to its end, and
// the downstream answers a tools/call without the SDK: one event, as npm
// server-everything writes it, with the request's id. direct makes the
// same POSTs to that server, for what the client and server cost alone.
// appends/commit is the log's batching: a commit's signature and store
// write are shared by the entries it carries, and under load it varies
// from run to run (2.7 to 12 in one series at 32 clients), and
// cpu-ns/op with it.
//
//	go test ./proxy -run '^$' -bench CallWire -cpuprofile /tmp/cpu.out
func BenchmarkCallWire(b *testing.B) {
	text, _ := json.Marshal("Echo: " + strings.Repeat("x", 1024))
	down := wireDownstream(b, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
	args := `{"message":"` + strings.Repeat("x", 1024) + `"}`
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(hc.CloseIdleConnections)
	// connect opens a session as BenchmarkCallHTTP's does, and returns a
	// function that makes one call on it.
	connect := func(b *testing.B, url string, p *Proxy, tool string) func() {
		cs := benchSession(b, url)
		if p != nil {
			fastSession(b, p, cs)
		}
		var id atomic.Int64
		want := []byte(`"isError"`)
		if p != nil {
			want = []byte(ReceiptKey)
		}
		return func() {
			body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id.Add(1), 10) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header = http.Header{
				"Content-Type":         {"application/json"},
				"Accept":               {"application/json, text/event-stream"},
				"Authorization":        {"Bearer " + testToken},
				"Mcp-Session-Id":       {cs.ID()},
				"Mcp-Protocol-Version": {"2025-11-25"},
			}
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"text":"Echo: xxx`)) || p != nil && !bytes.Contains(got, want) {
				b.Fatalf("HTTP %d, %v: %.300s", resp.StatusCode, err, got)
			}
		}
	}
	run := func(b *testing.B, calls []func()) {
		b.ReportAllocs()
		cpu := int64(proctest.CPU())
		if len(calls) == 1 {
			for b.Loop() {
				calls[0]()
			}
		} else {
			var next atomic.Int32
			b.SetParallelism((len(calls) + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				call := calls[int(next.Add(1)-1)%len(calls)]
				for pb.Next() {
					call()
				}
			})
		}
		b.ReportMetric(float64(int64(proctest.CPU())-cpu)/float64(b.N), "cpu-ns/op")
	}
	for _, clients := range []int{1, 32} {
		suffix := ""
		if clients > 1 {
			suffix = "-" + strconv.Itoa(clients)
		}
		b.Run("direct"+suffix, func(b *testing.B) {
			calls := make([]func(), clients)
			for i := range calls {
				calls[i] = connect(b, down, nil, "echo")
			}
			run(b, calls)
		})
		b.Run("proxied"+suffix, func(b *testing.B) {
			l := newTestLog(b)
			p := startProxy(b, l, []ServerConfig{{ID: "e", URL: down}}, nil)
			url := serveHTTP(b, p)
			calls := make([]func(), clients)
			for i := range calls {
				calls[i] = connect(b, url, p, "e__echo")
			}
			before := l.seq.Stats()
			run(b, calls)
			after := l.seq.Stats()
			b.ReportMetric(float64(after.Appends-before.Appends)/float64(after.Commits-before.Commits), "appends/commit")
			if p.fastCalls.Load() == 0 {
				b.Error("no call took the fast path")
			}
		})
	}
}

// benchSession opens a 2025-11-25 session on the front at url with the
// test token, closed when the (sub-)benchmark b ends, before the servers
// it reaches: a session closed by the parent instead kept its standalone
// stream open, and the front's httptest.Server.Close waited for it for
// ever.
func benchSession(b *testing.B, url string) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// BenchmarkFrontResult: a 16 KiB tools/call result made ready for its
// client, as the call path does once its outcome is in (canonical form
// made by the wire reader) and once its receipt is: a plain one, one
// with go-sdk's escapes of "<" and ">", and one with a _meta of its own
// (the receipt merged in).
func BenchmarkFrontResult(b *testing.B) {
	text := strings.Repeat("x", 16<<10)
	esc, _ := json.Marshal("<div>" + text + "</div>")
	for name, raw := range map[string]string{
		"plain":   `{"content":[{"type":"text","text":"` + text + `"}],"isError":false}`,
		"escaped": `{"content":[{"type":"text","text":` + string(esc) + `}],"isError":false}`,
		"meta":    `{"_meta":{"k":1},"content":[{"type":"text","text":"` + text + `"}],"isError":false}`,
	} {
		b.Run(name, func(b *testing.B) {
			d := &downstream{cfg: ServerConfig{ID: "x"}}
			raw := json.RawMessage(raw)
			canon, err := log.Canonicalize(raw)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := frontFor(d, "tools/call", raw, canon, "receipt"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFrontRead: a 16 KiB resources/read or prompts/get result made
// into what the client gets (frontReadAs), from the canonical form its
// entry hashed: spliced as it is, or, with a URI to give its front form,
// decoded and encoded again.
func BenchmarkFrontRead(b *testing.B) {
	text, _ := json.Marshal("<div>" + strings.Repeat("x", 16<<10) + "</div>")
	receipt := &log.Receipt{Extra: make([]byte, 32), Index: 7, Proof: [][]byte{make([]byte, 32), make([]byte, 32)}, Checkpoint: []byte("provlog.test/proxy\n8\nAAAA\n\n— provlog.test/proxy sig\n")}
	empty := ""
	for _, bc := range []struct {
		name, kind, raw string
		prefix          *string
	}{
		{"resource", log.KindResourceRead, `{"contents":[{"uri":"file:///a","mimeType":"text/html","text":` + string(text) + `}],"_meta":{"k":1}}`, &empty},
		{"resource-prefixed", log.KindResourceRead, `{"contents":[{"uri":"file:///a","mimeType":"text/html","text":` + string(text) + `}],"_meta":{"k":1}}`, nil},
		{"prompt", log.KindPromptGet, `{"messages":[{"role":"user","content":{"type":"text","text":` + string(text) + `}}],"description":"d"}`, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := &downstream{cfg: ServerConfig{ID: "x", Prefix: bc.prefix}}
			raw := json.RawMessage(bc.raw)
			canon, err := log.Canonicalize(raw)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			res := readResult{raw: raw, canon: canon, receipt: receipt}
			for b.Loop() {
				var err error
				if bc.kind == log.KindPromptGet {
					_, err = frontReadAs[mcp.GetPromptResult](ctx, d, "2025-11-25", bc.kind, res, nil)
				} else {
					_, err = frontReadAs[mcp.ReadResourceResult](ctx, d, "2025-11-25", bc.kind, res, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
