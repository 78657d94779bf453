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
// tools/call to a downstream server gets a SERVER span named
// "tools/call <tool>" that continues the trace context the client put in
// params._meta (traceparent, tracestate), carries mcp.method.name,
// gen_ai.tool.name, gen_ai.operation.name, mcp.protocol.version,
// mcp.session.id, jsonrpc.request.id (the SDK's path does not expose it),
// network.transport and, for a failed call, error.type ("tool_error" for a
// result with isError, else the JSON-RPC error code) and
// rpc.response.status_code. The span names the call entry it produced:
// provlog.log.index and provlog.log.leaf_hash (hex RFC 6962 leaf hash), so
// a trace leads to the entry and its proof (provlog prove --leaf-hash).
// Each durable append is a child span. The downstream server gets the
// proxy's span as its parent in _meta.
//
// Nothing from the arguments or results goes into a span, and the session
// id goes in as a digest: over HTTP it is half of what lets a request into
// a session. Without a Tracer no span is made and nothing is allocated.

// Trace attribute keys of provlog's own.
const (
	attrLogIndex = attribute.Key("provlog.log.index")
	attrLeafHash = attribute.Key("provlog.log.leaf_hash")
	attrActor    = attribute.Key("provlog.actor")
	attrServer   = attribute.Key("provlog.server")
)

// traceCall is what the front knows of a tools/call when it starts.
type traceCall struct {
	front     string // the tool's front name
	meta      mcp.Meta
	session   string
	protocol  string
	id        json.RawMessage // the JSON-RPC request id, if known
	transport string          // "pipe" (stdio) or "tcp"
}

// A callSpan is the span of one tools/call; nil when tracing is off.
type callSpan struct{ span trace.Span }

// startSpan starts tc's span, if tracing is on and the call is sampled.
func (p *Proxy) startSpan(ctx context.Context, tc traceCall) (context.Context, *callSpan) {
	if p.opts.Tracer == nil {
		return ctx, nil
	}
	meta := tc.meta
	ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta))
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.tool.name", tc.front),
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("network.transport", tc.transport),
	}
	if tc.protocol != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", tc.protocol))
	}
	if tc.session != "" {
		sum := sha256.Sum256([]byte(tc.session))
		attrs = append(attrs, attribute.String("mcp.session.id", hex.EncodeToString(sum[:8])))
	}
	if id := requestID(tc.id); id != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", id))
	}
	ctx, span := p.opts.Tracer.Start(ctx, "tools/call "+tc.front,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return ctx, nil
	}
	return ctx, &callSpan{span}
}

// recorded notes c's call entry on the span.
func (s *callSpan) recorded(c *call) {
	if s == nil || c == nil {
		return
	}
	s.span.SetAttributes(attrActor.String(c.actor), attrServer.String(c.server),
		attrLogIndex.Int64(int64(c.index)), attrLeafHash.String(hex.EncodeToString(log.LeafHash(c.entry))))
}

// end ends the span of a call that was answered with rerr (nil: a
// result); c is nil for a call that was not made. Only texts the log
// holds too (scrubbed of redacted values) go into the span.
func (s *callSpan) end(c *call, rerr *jsonrpc.Error) {
	if s == nil {
		return
	}
	defer s.span.End()
	switch {
	case rerr != nil:
		code := strconv.FormatInt(rerr.Code, 10)
		s.span.SetAttributes(attribute.String("error.type", code), attribute.String("rpc.response.status_code", code))
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

// inject puts ctx's span into m as the downstream request's parent.
func (p *Proxy) injectTrace(ctx context.Context, m mcp.Meta) {
	if p.opts.Tracer == nil || m == nil {
		return
	}
	propagation.TraceContext{}.Inject(ctx, metaCarrier(m))
}

// appendSpan starts the span of one durable append (c nil: a call
// entry), if the call is traced; end it with its outcome.
func (p *Proxy) appendSpan(ctx context.Context, c *call) (context.Context, func(*log.Receipt, error)) {
	if p.opts.Tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, func(*log.Receipt, error) {}
	}
	name := "provlog append call"
	if c != nil {
		name = "provlog append call.result"
	}
	ctx, span := p.opts.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(r *log.Receipt, err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attrLogIndex.Int64(int64(r.Index)))
		}
		span.End()
	}
}

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
