package otlp

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/provlog/provlog/cmd/internal/otlp/otlptest"
)

// testSpans are spans with every kind of attribute value, events, links,
// statuses, remote and local parents and dropped counts, under two
// resources and three scopes.
func testSpans() []sdktrace.ReadOnlySpan {
	ts, _ := trace.ParseTraceState("vendor=x,other=y")
	ctx := func(t, s byte, remote bool) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{t, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, SpanID: trace.SpanID{s, 1, 2, 3, 4, 5, 6, 7},
			TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote,
		})
	}
	every := []attribute.KeyValue{
		attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 1.5), attribute.String("s", "str"),
		attribute.ByteSlice("bytes", []byte{0, 1, 2}), attribute.BoolSlice("bs", []bool{true, false}),
		attribute.Int64Slice("is", []int64{1, 2}), attribute.Float64Slice("fs", []float64{0.25}),
		attribute.StringSlice("ss", []string{"a", "b"}),
		attribute.Slice("slice", attribute.IntValue(1), attribute.StringValue("two")),
		attribute.Map("map", attribute.String("k", "v"), attribute.Int("n", 3)),
		{Key: "empty"},
	}
	r1 := resource.NewSchemaless(attribute.String("service.name", "one"), attribute.String("provlog.log.origin", "o"))
	r2 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "two"))
	s1 := instrumentation.Scope{Name: "scope-a", Version: "1.0"}
	s2 := instrumentation.Scope{Name: "scope-b", SchemaURL: "https://example/s", Attributes: attribute.NewSet(attribute.String("sa", "x"))}
	t0 := time.Unix(1_700_000_000, 123456789)
	stubs := tracetest.SpanStubs{
		{
			Name: "tools/call echo", SpanContext: ctx(1, 1, false), Parent: ctx(1, 9, true), SpanKind: trace.SpanKindServer,
			StartTime: t0, EndTime: t0.Add(time.Millisecond), Attributes: every,
			Events: []sdktrace.Event{{Name: "ev", Time: t0.Add(time.Microsecond), Attributes: every[:3], DroppedAttributeCount: 2}},
			Links:  []sdktrace.Link{{SpanContext: ctx(2, 2, true), Attributes: every[3:5], DroppedAttributeCount: 1}, {SpanContext: ctx(3, 3, false)}},
			Status: sdktrace.Status{Code: codes.Error, Description: "it broke"}, DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5,
			Resource: r1, InstrumentationScope: s1,
		},
		{Name: "GET /log/entry/{index}", SpanContext: ctx(1, 2, false), Parent: ctx(1, 1, false), SpanKind: trace.SpanKindClient,
			StartTime: t0, EndTime: t0, Status: sdktrace.Status{Code: codes.Ok}, Resource: r1, InstrumentationScope: s2},
		{Name: "internal", SpanContext: ctx(4, 4, false), SpanKind: trace.SpanKindInternal, Resource: r1, InstrumentationScope: s1},
		{Name: "producer", SpanContext: ctx(5, 5, false), SpanKind: trace.SpanKindProducer, StartTime: t0, EndTime: t0, Resource: r2, InstrumentationScope: s1},
		{Name: "consumer", SpanContext: ctx(6, 6, false), SpanKind: trace.SpanKindConsumer, StartTime: t0, EndTime: t0, Resource: r2},
	}
	return stubs.Snapshots()
}

// A receiver records what is posted to it and answers with the statuses
// it is given, in turn (the last one from then on).
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	bodies   [][]byte // decompressed
	headers  []http.Header
	statuses []int
	answer   []byte        // the body of a 200
	hold     chan struct{} // if not nil, requests wait for it to close
	arrived  int           // requests that arrived, held or not
	echo     bool          // an error's body quotes the request's Authorization and URL
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.arrived++
	r.mu.Unlock()
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-req.Context().Done():
			return
		}
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
	b, _ := io.ReadAll(body)
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.headers = append(r.headers, req.Header.Clone())
	code := http.StatusOK
	if len(r.statuses) > 0 {
		code = r.statuses[0]
		if len(r.statuses) > 1 {
			r.statuses = r.statuses[1:]
		}
	}
	answer := r.answer
	r.mu.Unlock()
	if code != http.StatusOK {
		w.Header().Set("Retry-After", "0")
		msg := "receiver says " + http.StatusText(code)
		if r.echo {
			msg += ": no tenant for " + req.Header.Get("Authorization") + " at " + req.URL.String()
		}
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(answer)
}

func (r *receiver) url() string { return r.srv.URL + "/v1/traces" }

func (r *receiver) requests() ([][]byte, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies), slices.Clone(r.headers)
}

// decode reads a request as an OTLP TracesData, its resources in the
// order of their service.name.
func decode(t *testing.T, b []byte) *tracepb.TracesData {
	t.Helper()
	var td tracepb.TracesData
	if err := proto.Unmarshal(b, &td); err != nil {
		t.Fatalf("request does not decode as OTLP: %v", err)
	}
	name := func(rs *tracepb.ResourceSpans) string {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	slices.SortFunc(td.ResourceSpans, func(a, b *tracepb.ResourceSpans) int { return strings.Compare(name(a), name(b)) })
	return &td
}

func fastRetry() Retry {
	return Retry{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, MaxElapsed: 10 * time.Second}
}

// TestSameAsSDKExporter: the same spans exported by the SDK's own
// OTLP/HTTP exporter and by this one reach a receiver as the same OTLP
// message, with the same content type and the configured headers.
func TestSameAsSDKExporter(t *testing.T) {
	ctx := context.Background()
	spans := testSpans()
	sdkRcv, ourRcv := newReceiver(t), newReceiver(t)
	hdr := map[string]string{"X-Api-Key": "k-1"}
	sdk, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sdkRcv.url()), otlptracehttp.WithHeaders(hdr))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := New(Config{URL: ourRcv.url(), Headers: hdr, UserAgent: "provlog/test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sdk.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if err := ours.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	sb, sh := sdkRcv.requests()
	ob, oh := ourRcv.requests()
	if len(sb) != 1 || len(ob) != 1 {
		t.Fatalf("%d and %d requests, want one each", len(sb), len(ob))
	}
	want, got := decode(t, sb[0]), decode(t, ob[0])
	if len(got.ResourceSpans) != 2 || len(got.ResourceSpans[0].ScopeSpans) != 2 {
		t.Fatalf("spans not grouped by resource and scope: %v", got)
	}
	if !proto.Equal(want, got) {
		t.Errorf("our request differs from the SDK exporter's:\nSDK:  %v\nours: %v", want, got)
	}
	for _, k := range []string{"Content-Type", "X-Api-Key", "Content-Encoding"} {
		if sh[0].Get(k) != oh[0].Get(k) {
			t.Errorf("%s: SDK sent %q, we sent %q", k, sh[0].Get(k), oh[0].Get(k))
		}
	}
	if oh[0].Get("User-Agent") != "provlog/test" {
		t.Errorf("User-Agent %q", oh[0].Get("User-Agent"))
	}
	if err := ours.ExportSpans(ctx, nil); err != nil {
		t.Errorf("no spans: %v", err)
	}
	if b, _ := ourRcv.requests(); len(b) != 1 {
		t.Errorf("exporting no spans sent a request")
	}
}

// TestRetries: a throttled or unavailable receiver is retried until it
// takes the batch; a refusal is not retried and is reported with its
// status and body, never with a header's value.
func TestRetries(t *testing.T) {
	ctx := context.Background()
	spans := testSpans()[:1]
	for _, tc := range []struct {
		name     string
		statuses []int
		retry    Retry
		requests int
		want     string // in the error; "" for success
	}{
		{"unavailable, then accepted", []int{503, 429, 502, 504, 200}, fastRetry(), 5, ""},
		{"refused", []int{400, 200}, fastRetry(), 1, "400 Bad Request (body: receiver says Bad Request)"},
		{"retries off", []int{503, 200}, Retry{Disabled: true}, 1, "503"},
		{"always unavailable", []int{503}, Retry{Initial: time.Millisecond, Max: time.Millisecond, MaxElapsed: 50 * time.Millisecond}, -1, "max retry time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			e, err := New(Config{URL: rcv.url(), Headers: map[string]string{"Authorization": "Bearer s3cret"}, Retry: tc.retry})
			if err != nil {
				t.Fatal(err)
			}
			err = e.ExportSpans(ctx, spans)
			bodies, headers := rcv.requests()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("export: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("export: error %v, want one saying %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("the error carries a header's value: %v", err)
			case tc.requests > 0 && len(bodies) != tc.requests:
				t.Errorf("%d requests, want %d", len(bodies), tc.requests)
			case tc.requests < 0 && len(bodies) < 2:
				t.Errorf("%d requests: not retried", len(bodies))
			}
			for i, h := range headers {
				if h.Get("Authorization") != "Bearer s3cret" {
					t.Errorf("request %d lacks the configured header", i)
				}
			}
		})
	}
}

// TestStopped: a receiver that does not answer is given up on after the
// request timeout (and retried while the batch's context lasts); a
// shutdown stops the request in flight.
func TestStopped(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	t.Cleanup(func() { close(rcv.hold) })
	// The request's own timeout, without retries: its error is the
	// client's timeout.
	e, err := New(Config{URL: rcv.url(), Timeout: 20 * time.Millisecond, Retry: Retry{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	one, stop := context.WithTimeout(context.Background(), 10*time.Second) // without the request's timeout, this ends it
	defer stop()
	if err := e.ExportSpans(one, testSpans()); err == nil || !strings.Contains(err.Error(), "Client.Timeout") {
		t.Errorf("export to a silent receiver, one request: %v", err)
	}
	// With retries, the caller's deadline ends them. Which of the two
	// deadlines the last request met depends on timing (the caller's may
	// fall during a request or between two), so only the caller's is
	// checked.
	e, err = New(Config{URL: rcv.url(), Timeout: 20 * time.Millisecond, Retry: fastRetry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = e.ExportSpans(ctx, testSpans())
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("export to a silent receiver, retried: %v", err)
	}
	rcv.mu.Lock()
	before := rcv.arrived
	rcv.mu.Unlock()
	e, err = New(Config{URL: rcv.url(), Retry: fastRetry()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- e.ExportSpans(context.Background(), testSpans()) }()
	for {
		rcv.mu.Lock()
		n := rcv.arrived
		rcv.mu.Unlock()
		if n > before {
			break
		}
		time.Sleep(time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("export ended before shutdown: %v", err)
		default:
		}
	}
	e.Shutdown(context.Background())
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the export in flight, at shutdown: %v, want it cancelled", err)
	}
	if err := e.ExportSpans(context.Background(), testSpans()); err == nil || !strings.Contains(err.Error(), "shut down") {
		t.Errorf("export after shutdown: %v", err)
	}
}

// TestPartialSuccessAnswer: a receiver that takes a batch but rejects
// some spans says so in its answer, and the export reports it.
func TestPartialSuccessAnswer(t *testing.T) {
	rcv := newReceiver(t)
	rcv.answer = partialAnswer(2, "two spans too old")
	e, err := New(Config{URL: rcv.url()})
	if err != nil {
		t.Fatal(err)
	}
	err = e.ExportSpans(context.Background(), testSpans())
	var ps *PartialSuccess
	if !errors.As(err, &ps) || ps.Rejected != 2 || ps.Message != "two spans too old" {
		t.Errorf("export: %v, want a partial success of 2 spans", err)
	}
	rcv.answer = partialAnswer(0, "")
	if err := e.ExportSpans(context.Background(), testSpans()); err != nil {
		t.Errorf("an empty partial success: %v", err)
	}
}

// TestCollector exports the test spans, gzipped, to the OpenTelemetry
// Collector's own OTLP receiver (tools/otelrecv, run by otlptest): it
// accepts them, and what it hands on is what was sent.
func TestCollector(t *testing.T) {
	rcv := otlptest.Start(t)
	e, err := New(Config{URL: rcv.URL + "/v1/traces", Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	spans := testSpans()
	if err := e.ExportSpans(context.Background(), spans); err != nil {
		t.Fatalf("export: %v; otelrecv said: %s", err, rcv.Stderr())
	}
	batches := rcv.Batches(t)
	if len(batches) != 1 {
		t.Fatalf("otelrecv wrote %d batches, want one", len(batches))
	}
	got := decode(t, batches[0])
	sent := resourceSpans(spans)
	for _, rs := range sent {
		for _, ss := range rs.ScopeSpans {
			if ss.Scope == nil {
				ss.Scope = &commonpb.InstrumentationScope{} // the collector writes an empty scope out
			}
		}
	}
	want, _ := proto.Marshal(&tracepb.TracesData{ResourceSpans: sent})
	if w := decode(t, want); !proto.Equal(w, got) {
		t.Errorf("the collector received other spans than were sent:\nsent:     %v\nreceived: %v", w, got)
	}
}
