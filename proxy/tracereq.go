package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"
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
		batchID(method, req)
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
		op = traceOp{uri: p.tracedURI(r.Params.URI), meta: r.Params.Meta, protocol: r.ProtocolVersion()}
	case *mcp.GetPromptRequest:
		if r.Params == nil {
			return op, false
		}
		op = traceOp{target: r.Params.Name, meta: r.Params.Meta, protocol: r.ProtocolVersion()}
		if d, _ := p.router.prompt(r.Params.Name); d != nil {
			op.target = d.secrets.scrubName(op.target) // as its prompt.get entry holds it
		}
	default:
		return op, false
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		op.session = sessionID(ss)
	}
	op.method, op.id, op.transport = method, frontRequestID(req.GetExtra()), frontTransport(req.GetExtra())
	return op, true
}

// tracedURI is a front resource URI as its span holds it: as its
// resource.read entry does, with the query parameters its server's
// redact list names redacted. A URI no server owns is read by none, and
// no list applies to it.
func (p *Proxy) tracedURI(uri string) string {
	d, _, ok := p.router.resource(uri)
	if !ok {
		return uri
	}
	uri, _ = redactURI(uri, d.cfg.Redact, d.cfg.RedactIgnoreCase)
	return d.secrets.scrubName(uri)
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

// handOverID puts the id of the JSON-RPC request body into r's header
// for the SDK's handler, after removing what the client sent under the
// internal names; only while tracing. A batch's messages share the one
// header, so for a batch it puts there the id of each traced request by
// what it asks (batchIDs), and each request takes its own (batchID).
func (p *Proxy) handOverID(r *http.Request, body []byte) {
	if p.opts.Tracer == nil {
		return
	}
	r.Header.Del(frontIDHeader)
	r.Header.Del(frontPipeHeader)
	r.Header.Del(frontBatchHeader)
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) > 0 && body[0] == '[' {
		if ids := batchIDs(body); ids != "" {
			r.Header.Set(frontBatchHeader, ids)
		}
		return
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &m) == nil && len(m.ID) > 0 && string(m.ID) != "null" {
		r.Header.Set(frontIDHeader, string(m.ID))
	}
}

// batchIDs maps the key of each traced request of a batch (requestKey) to
// its id, as JSON; a key two requests share maps to null, as nothing
// tells them apart. Each message is read as the SDK reads it (sdkDecode),
// so its key is the one its handler's request has.
func batchIDs(body []byte) string {
	var elems []json.RawMessage
	if json.Unmarshal(body, &elems) != nil {
		return ""
	}
	ids := map[string]json.RawMessage{}
	for _, e := range elems {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if sdkDecode(e, &m) != nil || len(m.ID) == 0 || string(m.ID) == "null" {
			continue
		}
		var key string
		var ok bool
		switch m.Method {
		case "tools/call":
			key, ok = paramsKey[mcp.CallToolParamsRaw](m.Method, m.Params)
		case "resources/read":
			key, ok = paramsKey[mcp.ReadResourceParams](m.Method, m.Params)
		case "prompts/get":
			key, ok = paramsKey[mcp.GetPromptParams](m.Method, m.Params)
		}
		if !ok {
			continue
		}
		if _, twice := ids[key]; twice {
			ids[key] = nil
		} else {
			ids[key] = m.ID
		}
	}
	if len(ids) == 0 {
		return ""
	}
	var b bytes.Buffer // the ids as they came: not HTML-escaped
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(ids) != nil {
		return ""
	}
	return string(bytes.TrimSpace(b.Bytes()))
}

// batchID gives a request that came in an HTTP batch the id the front
// found for it, where a single message's goes (a header of its own: the
// batch's messages share one).
func batchID(method string, req mcp.Request) {
	ex := req.GetExtra()
	if ex == nil || ex.Header == nil || ex.Header.Get(frontBatchHeader) == "" {
		return
	}
	var ids map[string]json.RawMessage
	json.Unmarshal([]byte(ex.Header.Get(frontBatchHeader)), &ids)
	var params any
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		params = r.Params
	case *mcp.ReadResourceRequest:
		params = r.Params
	case *mcp.GetPromptRequest:
		params = r.Params
	}
	h := ex.Header.Clone()
	h.Del(frontBatchHeader)
	if id := ids[requestKey(method, params)]; len(id) > 0 && string(id) != "null" {
		h.Set(frontIDHeader, string(id))
	}
	ex.Header = h
}

// paramsKey is the requestKey of a request of method with params raw,
// decoded as the SDK decodes them into a *P.
func paramsKey[P any](method string, raw json.RawMessage) (string, bool) {
	var p *P
	if len(raw) > 0 && sdkDecode(raw, &p) != nil {
		return "", false
	}
	return requestKey(method, p), true
}

// requestKey is what a traced request asks, as a digest: its method and
// its params as decoded.
func requestKey(method string, params any) string {
	b, _ := json.Marshal(params)
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// sdkDecode decodes JSON as go-sdk does: its field names match exactly.
func sdkDecode(b []byte, v any) error {
	dec := sjson.NewDecoder(bytes.NewReader(b))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(v)
}

// tracedMethod reports whether requests of method may get a span.
func tracedMethod(method string) bool {
	return method == "tools/call" || method == "resources/read" || method == "prompts/get"
}
