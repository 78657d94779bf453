package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/provlog/provlog/log"
)

// Traces, according to the OpenTelemetry semantic conventions for MCP
// (gen-ai/mcp.md, Development status): with Options.Tracer set, every
// recorded request gets a SERVER span named "{mcp.method.name} {target}"
// that continues the trace context the client put in params._meta
// (traceparent, tracestate):
//
//   - a tools/call to a downstream server ("tools/call <tool>"), made by
//     the call's lifecycle (serveCall) on every front path;
//   - a tools/call of the sidecar's own recording tools: the task tools
//     and record_replay ("tools/call create_task");
//   - resources/read ("resources/read", with mcp.resource.uri) and
//     prompts/get ("prompts/get <prompt>", with gen_ai.prompt.name).
//
// The last two kinds are made by a receiving middleware of the front
// server (traceRequests), which finds the entry in the receipt the
// result carries. Every span carries mcp.method.name, mcp.protocol.version,
// mcp.session.id, jsonrpc.request.id, network.transport, gen_ai.tool.name
// and gen_ai.operation.name for tools/call and, for a failed request,
// error.type ("tool_error" for a result with isError, else the JSON-RPC
// error code) and rpc.response.status_code. It names the entry the
// request produced: provlog.log.index and provlog.log.leaf_hash (hex RFC
// 6962 leaf hash), so a trace leads to the entry and its proof (provlog
// prove --leaf-hash); for a downstream call that is the call entry, whose
// call.result cites it. Each durable append is a child span. The
// downstream server gets the proxy's span as its parent in _meta.
//
// Nothing from the arguments or results goes into a span, a resource URI
// goes in as its entry holds it (redacted query values), and the session
// id goes in as a digest: over HTTP it is half of what lets a request into
// a session. What a client names (a tool, a prompt, a URI, a request id)
// is cut to maxSpanText bytes: no one request makes the batch it is
// exported in too large. Without a Tracer no span is made and nothing is
// allocated.
//
// # The request id
//
// go-sdk keeps a request's JSON-RPC id from its handlers, so the fronts
// hand it over in the request's RequestExtra.Header, under
// [frontIDHeader], and only while tracing: the HTTP front from the
// message it has read anyway ([Proxy.HTTPHandler], after dropping any
// such header the client sent), the stdio front from each request its
// connection reads (idConn, frontpipe.go). The messages of an HTTP batch
// share one header, so there the front puts each traced request's id
// under what it asks (its method and params as the SDK decodes them), and
// each takes its own ([batchID]). The fast path reads the id itself.

// maxSpanText bounds each text a client names that goes into a span.
const maxSpanText = 512

// Trace attribute keys of provlog's own.
const (
	attrLogIndex = attribute.Key("provlog.log.index")
	attrLeafHash = attribute.Key("provlog.log.leaf_hash")
	attrActor    = attribute.Key("provlog.actor")
	attrServer   = attribute.Key("provlog.server")
)

// The fronts' internal headers in a request's RequestExtra (never sent
// anywhere): the request's JSON-RPC id as its JSON text, and, from the
// stdio front, that the request came over a pipe.
const (
	frontIDHeader    = "Provlog-Internal-Jsonrpc-Id"
	frontPipeHeader  = "Provlog-Internal-Pipe"
	frontBatchHeader = "Provlog-Internal-Batch-Ids" // an HTTP batch's (handOverID)
)

// traceOp is what a front knows of a request when it starts.
type traceOp struct {
	method    string          // mcp.method.name
	target    string          // the tool's or prompt's front name
	uri       string          // resources/read: the front URI
	meta      mcp.Meta        // the request's _meta
	session   string          // the front session's id
	protocol  string          // the request's protocol revision
	id        json.RawMessage // the JSON-RPC request id, if known
	transport string          // "pipe" (stdio) or "tcp"
}

// An opSpan is the span of one request; nil when tracing is off.
type opSpan struct{ span trace.Span }

// startSpan starts op's span, if tracing is on and the request is
// sampled.
func (p *Proxy) startSpan(ctx context.Context, op traceOp) (context.Context, *opSpan) {
	if p.opts.Tracer == nil {
		return ctx, nil
	}
	ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(op.meta))
	op.target, op.uri = SpanText(op.target), SpanText(op.uri)
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", op.method),
		attribute.String("network.transport", op.transport),
	}
	name := op.method
	switch op.method {
	case "tools/call":
		attrs = append(attrs, attribute.String("gen_ai.tool.name", op.target), attribute.String("gen_ai.operation.name", "execute_tool"))
		name += " " + op.target
	case "prompts/get":
		attrs = append(attrs, attribute.String("gen_ai.prompt.name", op.target))
		name += " " + op.target
	case "resources/read":
		// Not in the name: URIs are many (the conventions' advice).
		attrs = append(attrs, attribute.String("mcp.resource.uri", op.uri))
	}
	if op.protocol != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", op.protocol))
	}
	if op.session != "" {
		sum := sha256.Sum256([]byte(op.session))
		attrs = append(attrs, attribute.String("mcp.session.id", hex.EncodeToString(sum[:8])))
	}
	if id := requestID(op.id); id != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", SpanText(id)))
	}
	ctx, span := p.opts.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return ctx, nil
	}
	return ctx, &opSpan{span}
}

// recorded notes c's call entry on the span.
func (s *opSpan) recorded(c *call) {
	if s == nil || c == nil {
		return
	}
	s.span.SetAttributes(attrActor.String(c.actor), attrServer.String(c.server),
		attrLogIndex.Int64(int64(c.index)), attrLeafHash.String(hex.EncodeToString(log.LeafHash(c.entry))))
}

// end ends the span of a call that was answered with rerr (nil: a
// result); c is nil for a call that was not made. Only texts the log
// holds too (scrubbed of redacted values) go into the span.
func (s *opSpan) end(c *call, rerr *jsonrpc.Error) {
	if s == nil {
		return
	}
	defer s.span.End()
	switch {
	case rerr != nil:
		s.failed(rerr.Code)
		desc := "the call was not made"
		if c != nil {
			desc = c.errText
		}
		s.span.SetStatus(codes.Error, desc)
	case c != nil && c.isError:
		s.span.SetAttributes(attribute.String("error.type", "tool_error"))
		s.span.SetStatus(codes.Error, c.errText)
	}
}

// failed notes a JSON-RPC error's code.
func (s *opSpan) failed(code int64) {
	text := strconv.FormatInt(code, 10)
	s.span.SetAttributes(attribute.String("error.type", text), attribute.String("rpc.response.status_code", text))
}

// injectTrace puts ctx's span into m as the downstream request's parent.
func (p *Proxy) injectTrace(ctx context.Context, m mcp.Meta) {
	if p.opts.Tracer == nil || m == nil {
		return
	}
	propagation.TraceContext{}.Inject(ctx, metaCarrier(m))
}

// appendSpan starts the span of one durable append of an entry of kind,
// if the request is traced; end it with its outcome.
func (p *Proxy) appendSpan(ctx context.Context, kind string) (context.Context, func(*log.Receipt, error)) {
	if p.opts.Tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, func(*log.Receipt, error) {}
	}
	ctx, span := p.opts.Tracer.Start(ctx, "provlog append "+kind, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(r *log.Receipt, err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attrLogIndex.Int64(int64(r.Index)))
		}
		span.End()
	}
}

// SpanText is a text a client named as a span holds it: cut to
// maxSpanText bytes (the sidecar's log API spans cut theirs alike).
func SpanText(s string) string { return truncate(s, maxSpanText-len("…")) }

// requestID is a JSON-RPC id's string form: a string's value, a number's
// digits.
func requestID(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// metaCarrier carries trace context in a request's _meta, where the MCP
// conventions put it.
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
