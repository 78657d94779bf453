package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
	"github.com/provlog/provlog/log"
)

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf, as the
// specification's /v1/traces has it), decoding with the OpenTelemetry
// protocol's own generated types: what a collector's otlpreceiver does
// before it hands spans on.
type otlpReceiver struct {
	URL string

	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
	headers  []http.Header
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf POST to /v1/traces", http.StatusUnsupportedMediaType)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Clone())
		for _, rs := range msg.ResourceSpans {
			r.resource = attrStrings(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// A spanSource is an OTLP/HTTP receiver a test reads the spans of.
type spanSource interface {
	endpoint() string
	// received returns the spans received so far and the attributes of
	// the last batch's resource.
	received(t *testing.T) ([]*tracepb.Span, map[string]string)
}

func (r *otlpReceiver) endpoint() string { return r.URL }

func (r *otlpReceiver) received(*testing.T) ([]*tracepb.Span, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), maps.Clone(r.resource)
}

// spanNamed returns the first span of src named name, or nil.
func spanNamed(t *testing.T, src spanSource, name string) *tracepb.Span {
	spans, _ := src.received(t)
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func attrStrings(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

// TestTracesOTLP runs the sidecar as a process with otel: pointing at an
// OTLP/HTTP receiver, and a stdio downstream: the OpenTelemetry
// Collector's own otlpreceiver (tools/otelrecv), and one of this test's
// that also sees the export's headers. A call whose _meta carries a
// traceparent becomes a span in the client's trace, with the MCP
// attributes and the index and leaf hash of its call entry, which the log
// serves; so does a task tool, and a read of the log API with a
// traceparent header. The batch delay is a minute, so the spans arrive
// only because SIGTERM flushes them.
func TestTracesOTLP(t *testing.T) {
	t.Run("receiver", func(t *testing.T) {
		rcv := startOTLPReceiver(t)
		stderr := tracesOTLP(t, rcv)
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if len(rcv.headers) == 0 || rcv.headers[0].Get("X-Collector-Key") != "k-123" {
			t.Errorf("the configured header did not reach the receiver")
		}
		if strings.Contains(stderr, "k-123") {
			t.Errorf("the exporter's header value reached stderr")
		}
	})
	t.Run("collector", func(t *testing.T) { tracesOTLP(t, startCollectorReceiver(t)) })
}

// The client's trace context in TestTracesOTLP.
const otelParentTrace, otelParentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"

// tracesOTLP is TestTracesOTLP against rcv; it returns the sidecar's
// stderr.
func tracesOTLP(t *testing.T, rcv spanSource) string {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	exe, _ := os.Executable()
	const token = "otel-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg := map[string]any{
		"data":    filepath.Join(t.TempDir(), "data"),
		"origin":  "provlog.test/otel",
		"actors":  []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		"servers": []map[string]any{{"id": "fx", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(t.TempDir(), "fx.txt")}}},
		"otel":    map[string]any{"endpoint": rcv.endpoint(), "headers": map[string]string{"X-Collector-Key": "k-123"}, "service_name": "provlog-test"},
	}
	cfgPath := filepath.Join(t.TempDir(), "provlog.yaml")
	cb, _ := json.Marshal(cfg)
	os.WriteFile(cfgPath, cb, 0o600)
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			sp.kill()
		}
	}()
	waitTools(t, sp.base, token, []string{"fx__append"})

	const parentTrace, parentSpan = otelParentTrace, otelParentSpan
	cs := connectHTTP(t, sp.base, token)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": "traced"},
		Meta: mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("fx__append: %v %v", err, res)
	}
	rc, _ := res.Meta["dev.provlog/receipt"].(string)
	r, err := log.ParseReceipt([]byte(rc))
	if err != nil {
		t.Fatal(err)
	}
	resultEntry := getEntry(t, sp.base, token, r.Index)
	e, _ := log.ParseEntry(resultEntry)
	cr, err := log.ParseCallResult(e)
	if err != nil {
		t.Fatal(err)
	}
	callEntry := getEntry(t, sp.base, token, cr.Call)

	// A task tool, and a read of the log API in the same trace.
	task, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "traced task"},
		Meta: mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"}})
	if err != nil || task.IsError {
		t.Fatalf("create_task: %v %v", err, task)
	}
	trc, _ := task.Meta["dev.provlog/receipt"].(string)
	tr, err := log.ParseReceipt([]byte(trc))
	if err != nil {
		t.Fatal(err)
	}
	taskEntry := getEntry(t, sp.base, token, tr.Index)
	req, _ := http.NewRequest("GET", sp.base+"/log/entry/"+strconv.FormatUint(tr.Index, 10), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if spanNamed(t, rcv, "tools/call fx__append") != nil {
		t.Fatal("a span arrived before the batch delay or shutdown: the test cannot tell that shutdown flushes")
	}

	sp.stop(t)
	stopped = true
	s := spanNamed(t, rcv, "tools/call fx__append")
	if s == nil {
		t.Fatalf("no span reached the receiver at shutdown; sidecar said: %s", sp.stderr.String())
	}
	checkCallSpan(t, s, cr.Call, callEntry)
	checkOtherSpans(t, rcv, s, tr.Index, taskEntry)
	_, resource := rcv.received(t)
	if resource["service.name"] != "provlog-test" || resource["provlog.log.origin"] != "provlog.test/otel" {
		t.Errorf("resource %v: want service.name provlog-test and the log's origin", resource)
	}
	return sp.stderr.String()
}

// TestOTelConfig: an otel: block names what is wrong with it.
func TestOTelConfig(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"otel: {}\n", "otel: endpoint is required"},
		{"otel: {endpoint: localhost:4318}\n", "must be an http:// or https:// URL"},
		{"otel: {endpoint: http://c:4318, batch: 1}\n", "field batch not found"},
		{"otel: {endpoint: http://c:4318, headers: {\"bad header\": x}}\n", "otel: headers"},
		{"otel: {endpoint: http://c:4318, headers: {X-Key: \"s3cret\\r\\nX-Other: 1\"}}\n", "otel: headers"},
	} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte(tc.text), 0o600)
		_, err := loadConfig(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error %v, want %q, without the header's value", tc.text, err, tc.want)
		}
	}
	for in, want := range map[string]string{"http://c:4318": "http://c:4318/v1/traces", "https://c/otlp/v1/traces": "https://c/otlp/v1/traces"} {
		if got, err := (&OTelConfig{Endpoint: in}).tracesURL(); err != nil || got != want {
			t.Errorf("endpoint %s: %s, %v; want %s", in, got, err, want)
		}
	}
}

// getEntry reads entry i's exact bytes from the log API.
func getEntry(t *testing.T, base, token string, i uint64) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/log/entry/"+strconv.FormatUint(i, 10), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("entry %d: %d %s", i, resp.StatusCode, b)
	}
	return bytes.Clone(b)
}

// checkCallSpan checks the span of the proxied call whose call entry is
// callIndex (callEntry).
func checkCallSpan(t *testing.T, s *tracepb.Span, callIndex uint64, callEntry []byte) {
	t.Helper()
	const parentTrace, parentSpan = otelParentTrace, otelParentSpan
	if got := hex.EncodeToString(s.TraceId); got != parentTrace {
		t.Errorf("trace id %s, want the client's %s", got, parentTrace)
	}
	if got := hex.EncodeToString(s.ParentSpanId); got != parentSpan {
		t.Errorf("parent span %s, want the client's %s", got, parentSpan)
	}
	if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span kind %v, want server", s.Kind)
	}
	attrs := attrStrings(s.Attributes)
	for k, v := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "fx__append", "gen_ai.operation.name": "execute_tool",
		"mcp.protocol.version": "2025-11-25", "network.transport": "tcp", "provlog.actor": "alice", "provlog.server": "fx",
		"provlog.log.index":     strconv.FormatUint(callIndex, 10),
		"provlog.log.leaf_hash": hex.EncodeToString(log.LeafHash(callEntry)),
	} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs["mcp.session.id"] == "" {
		t.Errorf("no mcp.session.id: %v", attrs)
	}
	// Whether the fast path or the SDK's handler served it (a session's
	// first call can come before the SDK has told the proxy the session
	// is initialized).
	if attrs["jsonrpc.request.id"] == "" {
		t.Errorf("no jsonrpc.request.id: %v", attrs)
	}

}

// checkOtherSpans checks, among rcv's spans, those of a create_task call
// that wrote entry taskIndex (taskEntry) and of a read of that entry from
// the log API, both in the client's trace; and that neither they nor the
// proxied call's span carry the arguments.
func checkOtherSpans(t *testing.T, rcv spanSource, call *tracepb.Span, taskIndex uint64, taskEntry []byte) {
	t.Helper()
	const parentTrace, parentSpan = otelParentTrace, otelParentSpan
	ts := spanNamed(t, rcv, "tools/call create_task")
	if ts == nil {
		t.Fatal("no span of create_task")
	}
	tattrs := attrStrings(ts.Attributes)
	for k, v := range map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "create_task", "gen_ai.operation.name": "execute_tool", "provlog.actor": "alice",
		"provlog.log.index": strconv.FormatUint(taskIndex, 10), "provlog.log.leaf_hash": hex.EncodeToString(log.LeafHash(taskEntry)),
	} {
		if tattrs[k] != v {
			t.Errorf("create_task span: %s = %q, want %q", k, tattrs[k], v)
		}
	}
	if tattrs["jsonrpc.request.id"] == "" || hex.EncodeToString(ts.TraceId) != parentTrace {
		t.Errorf("create_task span: trace %x, attributes %v: want the client's trace and a jsonrpc.request.id", ts.TraceId, tattrs)
	}
	for _, s := range []*tracepb.Span{call, ts} {
		for k, v := range attrStrings(s.Attributes) {
			if strings.Contains(v, "traced") {
				t.Errorf("span %s: %s = %q carries the call's arguments", s.Name, k, v)
			}
		}
	}
	var ls *tracepb.Span
	spans, _ := rcv.received(t)
	for _, s := range spans {
		if s.Name == "GET /log/entry/{index}" && len(s.ParentSpanId) > 0 {
			ls = s // getEntry's reads have no traceparent: new traces
		}
	}
	if ls == nil {
		t.Fatal("no span of the log API's entry read in the client's trace")
	}
	lattrs := attrStrings(ls.Attributes)
	if lattrs["http.response.status_code"] != "200" || lattrs["provlog.log.index"] != strconv.FormatUint(taskIndex, 10) ||
		hex.EncodeToString(ls.ParentSpanId) != parentSpan || ls.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("log API span: kind %v, parent %x, attributes %v", ls.Kind, ls.ParentSpanId, lattrs)
	}
}

// collectorReceiver is the OpenTelemetry Collector's otlpreceiver, run by
// otlptest.
type collectorReceiver struct{ *otlptest.Collector }

func startCollectorReceiver(t *testing.T) *collectorReceiver {
	t.Helper()
	return &collectorReceiver{otlptest.Start(t)}
}

func (c *collectorReceiver) endpoint() string { return c.URL }

func (c *collectorReceiver) received(t *testing.T) ([]*tracepb.Span, map[string]string) {
	t.Helper()
	var spans []*tracepb.Span
	var resource map[string]string
	for _, b := range c.Batches(t) {
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			t.Fatalf("a batch otelrecv wrote: %v", err)
		}
		for _, rs := range msg.ResourceSpans {
			resource = attrStrings(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return spans, resource
}

// TestOTelShutdownRedactsEndpoint: a receiver that never answers makes
// the flush at shutdown give up, and the warning that says so must not
// carry the endpoint's credentials (its userinfo, its query), which every
// other message shows redacted.
func TestOTelShutdownRedactsEndpoint(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hung }))
	defer srv.Close()
	defer close(hung)
	endpoint := strings.Replace(srv.URL, "http://", "http://otel:pw-s3cret@", 1) + "/v1/traces?api_key=key-s3cret"
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	tracer, stop, err := startTracing(context.Background(), &OTelConfig{Endpoint: endpoint}, "origin", logger)
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracer.Start(context.Background(), "one")
	span.End()
	stop()
	if !strings.Contains(out.String(), "flushing traces at shutdown") {
		t.Fatalf("the flush at shutdown did not fail against a receiver that never answers: %s", out.String())
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Errorf("the log carries the endpoint's credentials: %s", out.String())
	}
}

// TestOTelExportErrorsLogged: a receiver that refuses every export, with
// a body of its own making, is reported in the sidecar's own log, where a
// value is quoted: its body's newlines and escapes never start a line of
// stderr that looks like one the sidecar wrote.
func TestOTelExportErrorsLogged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no\nforged level=ERROR msg=\"the log was rewritten\"\n\x1b[2J", http.StatusBadRequest)
	}))
	defer srv.Close()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	cfg := writeConfig(t, t.TempDir(), "data: ./d\notel: {endpoint: \""+srv.URL+"\"}\n")
	sp := startSidecarProc(t, "--config", cfg)
	resp, err := http.Get(sp.base + "/log/checkpoint") // a span of the log API
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the refused export is reported", func() bool { return strings.Contains(sp.stderr.String(), "400 Bad Request") })
	for _, line := range strings.Split(sp.stderr.String(), "\n") {
		if strings.HasPrefix(line, "forged") || strings.Contains(line, "\x1b") || !strings.Contains(line, "level=") && line != "" {
			t.Errorf("a line of stderr the sidecar's log did not write: %q", line)
		}
	}
}

// TestLogAPISpanBoundsPath: the url.path of a log API request's span is
// the client's path cut short, as every text a client names in a span is.
func TestLogAPISpanBoundsPath(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	h := traceLogAPI(tp.Tracer("t"), http.NotFoundHandler())
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/log/"+strings.Repeat("x", 100_000), nil))
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	for _, kv := range spans[0].Attributes() {
		if v := kv.Value.Emit(); len(v) > 512 {
			t.Errorf("%s is %d bytes", kv.Key, len(v))
		}
	}
}
