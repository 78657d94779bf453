package proxy

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/provlog/provlog/log"
)

// traceRequests is a receiving middleware of the front server, added only
// with a Tracer: the span of each recorded request the SDK's handler
// serves that serveCall does not, found by the receipt its result
// carries (see trace.go).
func (p *Proxy) traceRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		op, ok := p.traceOpOf(method, req)
		if !ok {
			return next(ctx, method, req)
		}
		ctx, span := p.startSpan(ctx, op)
		res, err := next(ctx, method, req)
		span.answered(ctx, p, req, res, err)
		return res, err
	}
}

// traceOpOf says what a request's span is, if it gets one here: not a
// downstream server's tool (serveCall's), nor the provlog__ tools (not
// recorded).
func (p *Proxy) traceOpOf(method string, req mcp.Request) (traceOp, bool) {
	var op traceOp
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params == nil || isOwnTool(r.Params.Name) || p.router.owner(toolNames, r.Params.Name) != nil {
			return op, false
		}
		op = traceOp{target: r.Params.Name, meta: r.Params.Meta, protocol: r.ProtocolVersion()}
	case *mcp.ReadResourceRequest:
		if r.Params == nil {
			return op, false
		}
		op = traceOp{uri: r.Params.URI, meta: r.Params.Meta, protocol: r.ProtocolVersion()}
	case *mcp.GetPromptRequest:
		if r.Params == nil {
			return op, false
		}
		op = traceOp{target: r.Params.Name, meta: r.Params.Meta, protocol: r.ProtocolVersion()}
	default:
		return op, false
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		op.session = sessionID(ss)
	}
	op.method, op.id, op.transport = method, frontRequestID(req.GetExtra()), frontTransport(req.GetExtra())
	return op, true
}

// answered ends the span of a request answered with res or err. The
// entry it wrote is the one its result's receipt proves: the receipt's
// extra line is the entry's leaf hash.
func (s *opSpan) answered(ctx context.Context, p *Proxy, req mcp.Request, res mcp.Result, err error) {
	if s == nil {
		return
	}
	defer s.span.End()
	var rerr *jsonrpc.Error
	switch {
	case errors.As(err, &rerr):
		s.failed(rerr.Code)
		s.span.SetStatus(codes.Error, "")
		return
	case err != nil:
		s.failed(jsonrpc.CodeInternalError)
		s.span.SetStatus(codes.Error, "")
		return
	}
	if res == nil {
		return
	}
	if tr, ok := res.(*mcp.CallToolResult); ok && tr.IsError {
		s.span.SetAttributes(attribute.String("error.type", "tool_error"))
		s.span.SetStatus(codes.Error, "")
	}
	text, _ := res.GetMeta()[ReceiptKey].(string)
	if text == "" {
		return // it wrote nothing (a refusal, or a task tool that only reads)
	}
	if r, err := log.ParseReceipt([]byte(text)); err == nil {
		s.span.SetAttributes(attrLogIndex.Int64(int64(r.Index)), attrLeafHash.String(hex.EncodeToString(r.Extra)))
	}
	if actor, err := p.actor(ctx, &mcp.CallToolRequest{Session: sessionOf(req), Extra: req.GetExtra()}); err == nil {
		s.span.SetAttributes(attrActor.String(actor))
	}
}

// sessionOf is req's front session, if it has one.
func sessionOf(req mcp.Request) *mcp.ServerSession {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return ss
}

// frontRequestID is the JSON-RPC id a front handed over in ex (see
// trace.go), or nil.
func frontRequestID(ex *mcp.RequestExtra) json.RawMessage {
	if ex == nil || ex.Header == nil {
		return nil
	}
	if v := ex.Header.Get(frontIDHeader); v != "" {
		return json.RawMessage(v)
	}
	return nil
}

// frontTransport is network.transport for a request that came with ex.
func frontTransport(ex *mcp.RequestExtra) string {
	if ex == nil || ex.Header == nil || ex.Header.Get(frontPipeHeader) != "" {
		return "pipe"
	}
	return "tcp"
}

// handOverID puts the id of the JSON-RPC request body (one message) into
// r's header for the SDK's handler, after removing what the client sent
// under the internal names; only while tracing.
func (p *Proxy) handOverID(r *http.Request, body []byte) {
	if p.opts.Tracer == nil {
		return
	}
	r.Header.Del(frontIDHeader)
	r.Header.Del(frontPipeHeader)
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &m) == nil && len(m.ID) > 0 && string(m.ID) != "null" {
		r.Header.Set(frontIDHeader, string(m.ID))
	}
}

// frontTransportOf wraps a front transport whose requests carry no
// RequestExtra (stdio, in-memory) so that each request hands its id over;
// only while tracing.
//
// The wrapper hides the SDK's own connection's unexported session hook,
// which the SDK uses for one thing: refusing a JSON-RPC batch on a
// session of 2025-06-18 or later. With tracing on, such a batch over
// stdio is served instead.
func (p *Proxy) frontTransportOf(t mcp.Transport) mcp.Transport {
	if p.opts.Tracer == nil {
		return t
	}
	return idTransport{t}
}

type idTransport struct{ mcp.Transport }

func (t idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return idConn{c}, nil
}

// idConn hands the id of each request that gets a span over in its
// RequestExtra (the others' Extra stays nil, as the SDK made it).
type idConn struct{ mcp.Connection }

func (c idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && err == nil && r.IsCall() && r.Extra == nil && tracedMethod(r.Method) {
		if id, err := json.Marshal(r.ID.Raw()); err == nil {
			r.Extra = &mcp.RequestExtra{Header: http.Header{frontIDHeader: {string(id)}, frontPipeHeader: {"1"}}}
		}
	}
	return m, err
}

// tracedMethod reports whether requests of method may get a span.
func tracedMethod(method string) bool {
	return method == "tools/call" || method == "resources/read" || method == "prompts/get"
}
