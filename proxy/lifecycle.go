package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// The one lifecycle of a tools/call, whichever front received it (stdio,
// streamable HTTP through the SDK's handler, the HTTP front's own JSON
// answers in httpfront.go) and whichever downstream serves it: serveCall finds
// the actor, writes the call entry, forwards, classifies the outcome,
// writes the call.result entry and returns the result as the client gets
// it. The fronts only frame it, each writing its bytes as they are (the
// SDK's front through serveTools' rawResult).
//
// Forwarding goes one way per downstream transport: to a stateful
// streamable HTTP server as one POST built here (postCall, httpcall.go),
// read off the wire; to a stdio server, or to a server of the sessionless
// 2026-07-28 revision (whose per-request envelope the SDK's client
// writes), through the SDK's client session with the result captured off
// the wire (sdkCall, capture.go).

// A callIn is one tools/call as a front received it.
type callIn struct {
	d         *downstream
	tool      string                 // its name on the server
	params    *mcp.CallToolParamsRaw // as the client sent them (Name is the front name)
	argsCanon []byte                 // Arguments' canonical form, if the reader made it already
	session   *mcp.ServerSession     // the calling front session (nil in some tests)
	extra     *mcp.RequestExtra      // its token and headers
	client    *mcp.Implementation    // clientInfo, for the call entry
	protocol  string                 // the session's protocol revision
	id        json.RawMessage        // the JSON-RPC request id, if the front knows it
	transport string                 // "pipe" (stdio) or "tcp", for the trace
	start     time.Time
	continues uint64       // a later leg's: the call.result whose input_required it answers
	secrets   *callSecrets // a later leg's: the redacted values of the legs before
	first     *call        // a parked call's later leg's: the first leg, whose tool and arguments it records
	ticket    uint64       // its place in d's gate (drain.go)

	down downSession // the session it goes to, once resolved
}

// A downSession is the downstream session a call goes to, resolved once:
// the call entry names that session's tool definition, and the call is
// sent to that same session (a newer stdio process that came up in
// between, or a restart, would otherwise take a call recorded against
// another process's definition).
type downSession struct {
	resolved bool
	cs       *mcp.ClientSession
	err      error
}

// target returns the session in goes to (sessionFor), resolved on first
// use and the same for the rest of in's leg, and for legs copied from it.
func (in *callIn) target(ctx context.Context) (*mcp.ClientSession, error) {
	if !in.down.resolved {
		cs, err := in.d.sessionFor(ctx, in.protocol)
		if err != nil && ctx.Err() != nil {
			return nil, err // not resolved: a later leg's context may wait again
		}
		in.down = downSession{resolved: true, cs: cs, err: err}
	}
	return in.down.cs, in.down.err
}

// serveCall records, forwards and answers one tools/call: the result is
// the server's as received, with the receipt in its _meta and front URIs
// (frontPrep.result). Nothing reaches the server unless the call entry is
// durable, and nothing is returned unless the outcome is. A call the
// server answers with input_required for a client that does not speak
// that revision goes on in further legs (bridge.go), each recorded the
// same way, until the server has what it needs; a 2026-07-28 client's
// call to an older server that asks it something is parked between the
// client's legs (park.go).
func (p *Proxy) serveCall(ctx context.Context, in *callIn) (res json.RawMessage, rerr *jsonrpc.Error) {
	d := in.d
	var c *call
	ctx, span := p.startSpan(ctx, traceOp{method: "tools/call", target: d.secrets.scrubName(in.params.Name), meta: in.params.Meta, session: sessionID(in.session),
		protocol: in.protocol, id: in.id, transport: in.transport})
	defer func() { span.end(c, rerr) }()
	if rerr := in.admit(ctx); rerr != nil {
		return nil, rerr
	}
	d = in.d
	defer d.gate.leave(in.ticket)
	actor, err := p.actor(ctx, &mcp.CallToolRequest{Session: in.session, Params: in.params, Extra: in.extra})
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidRequest, "provlog: %v", err)
	}
	var receipt string
	if p.parks(ctx, in) {
		c, receipt, rerr = p.serveParked(ctx, in, actor, span)
	} else {
		c, receipt, rerr = p.serveLegs(ctx, in, actor, span)
	}
	if rerr != nil {
		return nil, rerr
	}
	front, err := c.front.result(c.result, receipt)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInternalError, "provlog: server %q: the result of the call to %q is recorded (log entry %d, provlog__prove gives its receipt) but cannot be passed on: %v", d.cfg.ID, c.tool, c.resultIndex, err)
	}
	return front, nil
}

// serveLeg records and forwards one leg of a call (the call itself, or a
// retry of it with the client's input) and records its outcome; it
// returns the call and its receipt, or the error the client gets.
func (p *Proxy) serveLeg(ctx context.Context, in *callIn, actor string, span *opSpan) (*call, string, *jsonrpc.Error) {
	c, rerr := p.startCall(ctx, in, actor)
	if rerr != nil {
		return nil, "", rerr
	}
	defer c.withdraw()
	span.recorded(c)
	callErr := p.forward(ctx, in, c)
	receipt, rerr := p.settle(ctx, in.d, c, callErr)
	return c, receipt, rerr
}

// serveTools is the SDK front's middleware that serves a tools/call of a
// downstream tool through the call lifecycle, whichever route brought it
// there (the stateless 2026-07-28 revision, a call with a progress token,
// stdio or HTTP). Its answer is the result as serveCall returns it,
// written by the SDK as it is (rawResult), not decoded into the
// SDK's type and encoded again, which dropped every member that type
// lacks. Everything else goes on to the SDK.
func (p *Proxy) serveTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, r mcp.Request) (mcp.Result, error) {
		req, ok := r.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || req.Params == nil {
			return next(ctx, method, r)
		}
		d, tool := p.router.tool(req.Params.Name)
		if d == nil {
			if err := p.notConnected(req.Params.Name); err != nil {
				return nil, err
			}
			return next(ctx, method, r) // the proxy's own tools, the task tools, or unknown
		}
		in := &callIn{d: d, tool: tool, params: req.Params, session: req.Session, extra: req.Extra,
			client: req.ClientInfo(), protocol: req.ProtocolVersion(), id: frontRequestID(req.Extra), transport: frontTransport(req.Extra), start: time.Now()}
		raw, rerr := p.serveCall(ctx, in)
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err() // cancelled by the client: nobody is listening
			}
			return nil, rerr
		}
		return p.rawResult(withProtocolResultType(raw, in.protocol)), nil
	}
}

// notConnected explains a tool name no server offers that carries the
// prefix of a configured server that is down (it never connected, or lost
// its connection before listing its tools): that server is not
// connected, and why, rather than "unknown tool". nil otherwise.
func (p *Proxy) notConnected(name string) error {
	for _, d := range p.downstreams() {
		if pre := d.cfg.toolPrefix(); pre != "" && strings.HasPrefix(name, pre) {
			if _, err := d.sup.session(); err != nil {
				return rpcError(jsonrpc.CodeInvalidParams, "provlog: tool %q: %v", name, err)
			}
		}
	}
	return nil
}

// A rawResult is a result that the SDK's server writes as it is: its
// MarshalJSON returns raw (which the SDK's encoder compacts). The
// embedded Result, of the method's type, makes it an mcp.Result and holds
// what middleware may read of it; it is never encoded.
type rawResult struct {
	mcp.Result
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// rawResult wraps raw, a result serveCall returned, for the SDK; its
// CallToolResult holds only what the trace reads (_meta and isError),
// and only while tracing.
func (p *Proxy) rawResult(raw json.RawMessage) *rawResult {
	tr := new(mcp.CallToolResult)
	if p.opts.Tracer != nil {
		var v struct {
			Meta    mcp.Meta `json:"_meta"`
			IsError bool     `json:"isError"`
		}
		json.Unmarshal(raw, &v) // serveCall's result is one JSON object
		tr.Meta, tr.IsError = v.Meta, v.IsError
	}
	return &rawResult{Result: tr, raw: raw}
}

// rawReads is the SDK front's middleware that has resources/read and
// prompts/get answered with the server's result as the read's handler
// made it for the client (frontReadAs), rather than the SDK's encoding of
// its decoding: the handler, which the SDK finds by URI or name, leaves
// those bytes in the request's context.
func rawReads(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "resources/read" && method != "prompts/get" {
			return next(ctx, method, req)
		}
		h := new(frontBytes)
		res, err := next(context.WithValue(ctx, frontBytesKey{}, h), method, req)
		if err != nil || res == nil || h.raw == nil {
			return res, err
		}
		return &rawResult{Result: res, raw: h.raw}, nil
	}
}

// frontBytes holds a read's result as the client gets it.
type frontBytes struct{ raw json.RawMessage }

type frontBytesKey struct{}

// withProtocolResultType gives raw resultType as the client's revision
// has it: none before 2026-07-28, "complete" unless the server said
// otherwise from then on (as the SDK gives every result of that revision).
func withProtocolResultType(raw json.RawMessage, protocol string) json.RawMessage {
	if protocol < statelessProtocol {
		return withoutResultType(raw)
	}
	return withResultType(raw)
}

// toolHandler is the SDK's handler of a downstream tool, which serveTools
// answers before the SDK's server reaches it: it is reached only for a
// tool the router no longer routes, while the SDK still lists it.
func (d *downstream) toolHandler(front, _ string) mcp.ToolHandler {
	return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, unknownTool(front, d.cfg.ID)
	}
}

// An outcome is what a downstream transport made of one call.
type outcome struct {
	result      json.RawMessage // as received
	resultCanon []byte          // its canonical form, if the reader made it
	isError     bool            // the result's isError
	remarshal   bool            // result is the SDK's re-encoding
	wireErr     *jsonrpc.Error  // the server answered with this JSON-RPC error
	err         error           // no answer: why
	lost        bool            // the connection closed during the call
	// gone: the session is no use any more and the server did not take
	// the call: it was unreachable (nothing was sent), or it answered 404
	// for the session, which MCP 2025-11-25 (transports, "Session
	// Management") has a server answer every request on a session it
	// ended with: the call did not run there.
	gone bool
}

// maxSessionRenewals is how many new sessions a call that found its HTTP
// server's session gone is carried to before it fails: a server that
// forgets every new session at once is not asked without end.
const maxSessionRenewals = 2

// forward makes in's call to its server, filling in c's outcome. It
// returns nil, the *jsonrpc.Error the server answered with (for the client
// as it is), or an errLocal.
func (p *Proxy) forward(ctx context.Context, in *callIn, c *call) error {
	d := in.d
	cs, err := in.target(ctx)
	if err != nil {
		c.isError, c.errText = true, err.Error()
		return errLocal{c.errText}
	}
	stateless := sessionStateless(cs)
	c.newSession = stateless
	meta := downMeta(in.params.Meta)
	if stateless && in.protocol < statelessProtocol {
		p.olderClientMeta(in.session, meta)
	}
	p.injectTrace(ctx, meta)
	if tok := in.params.GetProgressToken(); tok != nil && in.session != nil {
		// Upstream tokens can collide across sessions, and arrive as
		// float64 which SetProgressToken panics on (research/mcp.md
		// §1.5.2-3), so the downstream gets a token of our own.
		down := "provlog-" + strconv.FormatUint(p.nextToken.Add(1), 10)
		meta["progressToken"] = down
		p.progress.Store(down, &progressRoute{session: in.session, token: normalizeToken(tok), ctx: ctx})
		defer p.progress.Delete(down)
	}
	// Noted as in progress, so that server requests and log messages the
	// server sends outside the call's own stream find its session.
	ic := &inflightCall{session: in.session, actor: c.actor, ctx: ctx, secrets: c.secrets}
	id := d.calls.begin(ic)
	defer d.calls.end(id)
	cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	d.gate.forwarding(in.ticket, cancel)
	var o outcome
	if d.cfg.URL != "" && !stateless {
		o = d.postCall(cctx, cs, in, meta, ic)
		// The server did not take the call (o.gone: it forgot the
		// session, restarted behind its URL or expiring it). MCP's client
		// starts a new session then, and so does the proxy, which is the
		// client here: the agent's own session, with the proxy, is as
		// valid as it was. The call, recorded once and not run, is the
		// same call on the new session: one call entry, one call.result.
		// A call whose outcome is unknown (o.lost: cut after it was sent)
		// may have run, and is never sent again.
		for n := 0; o.gone && cctx.Err() == nil; n++ {
			if n == maxSessionRenewals {
				o.err = fmt.Errorf("%w, on %d sessions in a row (each new one started for this call); the call was not run", o.err, n+1)
				break
			}
			next, err := d.renewSession(cctx, cs)
			if err == nil {
				err = d.sameDefinition(in.params.Name, c.toolSum, next)
			}
			if err != nil {
				o = outcome{err: fmt.Errorf("%v; the call was not run, and a new session could not take it: %w", o.err, err)}
				break
			}
			cs, in.down.cs = next, next
			o = d.postCall(cctx, cs, in, meta, ic)
		}
	} else {
		o = sdkCall(cctx, cs, in.tool, in.params, meta)
	}
	return d.classify(ctx, cctx, cs, in.tool, c, o)
}

// sdkCall makes a call through the SDK's client session, capturing its
// result off the wire.
func sdkCall(ctx context.Context, cs *mcp.ClientSession, tool string, in *mcp.CallToolParamsRaw, meta mcp.Meta) outcome {
	params := &mcp.CallToolParams{Name: tool, Meta: meta}
	if len(in.Arguments) > 0 {
		params.Arguments = in.Arguments
	}
	// A retry after an input_required result (SEP-2322) goes on as the
	// client sent it.
	params.InputResponses, params.RequestState = in.InputResponses, in.RequestState
	cp := &capture{taken: true}
	res, err := sdkDecoded(func() (*mcp.CallToolResult, error) { return cs.CallTool(withCapture(ctx, cp), params) })
	cp.done()
	o := outcome{result: cp.last()}
	switch {
	case cp.unreadable() != nil:
		// As an HTTP server's answer that parseWire cannot read
		// (nested past encoding/json's bound): the call fails alone.
		o.err = fmt.Errorf("the answer is not a JSON-RPC message the proxy can read: %w", cp.unreadable())
		return o
	case o.result != nil && cp.remoteError() == nil:
		// The call's outcome is its result as received, as an HTTP
		// server's is, which classify judges as one (frontPrepare),
		// whatever go-sdk made of it: a stdio server's go-sdk does not
		// decode (capture.taken), its canonical form made as it was read; an HTTP server's it may have failed to
		// (a number beyond a double, 1e999, an input request that is
		// null, which its decoding panics on), failing the call with Go's
		// words for its struct fields.
		if o.resultCanon = cp.lastCanon(); o.resultCanon == nil {
			o.resultCanon, _ = log.Canonicalize(o.result)
		}
		o.isError = resultIsError(o.result, o.resultCanon)
		return o
	case err == nil:
		// Not expected (see capture.go); hash the SDK's re-encoding
		// rather than nothing, and say so in the entry.
		o.result, _ = json.Marshal(res)
		o.remarshal, o.isError = true, res.IsError
		return o
	}
	o.err, o.wireErr = cp.answerError(err), cp.remoteError()
	o.lost = errors.Is(o.err, mcp.ErrConnectionClosed) || errors.Is(o.err, io.EOF) || errors.Is(o.err, io.ErrUnexpectedEOF)
	return o
}

// sdkDecoded is call, a request made through go-sdk's client, with a
// panic of go-sdk's decoding of the answer as its error: go-sdk v1.8.0's
// InputRequestMap.UnmarshalJSON panics on an input request that is null
// ("inputRequests":{"a":null}). The answer was read by then, so the
// connection is as it was; the caller judges the result as received.
func sdkDecoded[R any](call func() (R, error)) (res R, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("go-sdk's decoding of the answer panicked: %v", r)
		}
	}()
	return call()
}

// stoppedText is the error of a call the proxy's stop cut off.
const stoppedText = "cut off: provlog was stopping"

// endedByContext reports whether err, a request's through go-sdk's
// client, ended it by its context (cancelled or timed out) rather than by
// an answer.
func endedByContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// reconnect closes cs, an HTTP server's session, and the idle
// connections under it, so that the supervisor connects again.
func (d *downstream) reconnect(cs *mcp.ClientSession) {
	cs.Close()
	if d.http1 != nil {
		d.http1.closeIdle()
	}
}

// renewSession closes cs, an HTTP server's session it no longer knows,
// and returns the next one the supervisor starts (at once: renewing),
// its lists read.
func (d *downstream) renewSession(ctx context.Context, cs *mcp.ClientSession) (*mcp.ClientSession, error) {
	d.sup.renewing(cs)
	d.reconnect(cs)
	next, err := d.sup.await(ctx, d.cfg.timeout())
	if err != nil {
		return nil, err
	}
	if sessionStateless(next) {
		return nil, fmt.Errorf("server %q now speaks revision %s, without sessions", d.cfg.ID, next.InitializeResult().ProtocolVersion)
	}
	return next, nil
}

// sameDefinition fails unless next, a renewed session, lists definition
// sum of front tool front, against which a call was recorded: on a
// session that lists another (or none) the call would run against a
// definition its entry does not name.
func (d *downstream) sameDefinition(front, sum string, next *mcp.ClientSession) error {
	now, err := d.cat.toolSum(front, next)
	switch {
	case err != nil:
		return err
	case now != sum:
		return fmt.Errorf("server %q lists another definition of the tool on its new session (sha256 %q; the call was recorded against %q)", d.cfg.ID, now, sum)
	}
	return nil
}

// classify turns a call's outcome into what its call.result entry says
// and what the client gets. ctx is the call's, cctx the one bounded by
// the server's timeout. This is the one place that words a failed call.
func (d *downstream) classify(ctx, cctx context.Context, cs *mcp.ClientSession, tool string, c *call, o outcome) error {
	c.result, c.resultCanon, c.remarshal = o.result, o.resultCanon, o.remarshal
	switch {
	case o.err == nil && o.wireErr == nil:
		var err error
		if c.front, err = d.frontPrepare("tools/call", c.result, c.resultCanon); err != nil {
			// A result the client cannot be given (null, an array, a
			// _meta that is no object) fails the call, and is recorded
			// so: its call.result said it succeeded.
			c.isError, c.errText = true, d.entryText(c.actor, fmt.Sprintf("server %q: %v", d.cfg.ID, err), c.secrets)
			return errLocal{c.errText}
		}
		c.isError = o.isError
		return nil
	case ctx.Err() == nil && cctx.Err() != nil && d.gate.cut():
		// Cut by a removed server's drain: an error the server sent is
		// its answer to that cancellation.
		c.errText = d.cancelledText(d.p.drainTimeout())
	case o.wireErr != nil && !endedByContext(o.err):
		// The server answered with a JSON-RPC error: the client sees it
		// verbatim; only the log copy is scrubbed. (One that came after
		// the call was given up, the server's answer to its cancellation,
		// is not the call's answer: the cases below word why it ended.)
		c.isError, c.errText, c.errCode = true, d.entryText(c.actor, o.wireErr.Message, c.secrets), o.wireErr.Code
		return o.wireErr
	case d.p.stopping.Load() && (ctx.Err() != nil || o.lost):
		c.errText = stoppedText
		d.p.logger.Warn("proxy: a call under way was cut off by the sidecar's stop", "actor", c.actor, "server", d.cfg.ID, "tool", c.tool, "call", c.index)
	case ctx.Err() != nil:
		c.errText = "cancelled by the client"
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		c.errText = fmt.Sprintf("server %q did not answer %s within %s", d.cfg.ID, tool, d.cfg.timeout())
	case o.lost:
		c.errText = fmt.Sprintf("server %q closed the connection during the call (it crashed or exited, or lost the session: %v); it is being reconnected", d.cfg.ID, o.err)
		// A transport's error may quote what the server sent (a stray
		// answer's id, say), and so what the call sent it.
		d.p.logger.Warn("proxy: downstream connection lost during a call; reconnecting", "actor", c.actor, "server", d.cfg.ID, "tool", c.tool, "call", c.index, "error", d.logText(o.err.Error(), c.secrets))
		if d.cfg.URL != "" {
			// A stdio session ends with its process; an HTTP one is
			// closed here, so that the supervisor connects again.
			d.reconnect(cs)
		}
	case o.gone:
		// The server is unreachable, or answered 404 to the new sessions
		// the call was carried to (forward): the session is closed so that
		// the supervisor connects again, or every later call would get
		// the 404 too.
		c.errText = fmt.Sprintf("server %q: %v; it is being reconnected", d.cfg.ID, o.err)
		d.p.logger.Warn("proxy: downstream session gone; reconnecting", "actor", c.actor, "server", d.cfg.ID, "tool", c.tool, "call", c.index, "error", d.logText(o.err.Error(), c.secrets))
		d.reconnect(cs)
	default:
		c.errText = fmt.Sprintf("server %q: %v", d.cfg.ID, o.err)
	}
	c.isError = true
	c.errText = d.entryText(c.actor, c.errText, c.secrets)
	return errLocal{c.errText}
}
