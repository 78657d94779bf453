package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy/release"
)

// Bounds on what a call entry copies from untrusted peers.
const (
	maxErrorText  = 4 << 10
	maxClientText = 256
	appendTimeout = 30 * time.Second
)

// A call is one tools/call on its way through the proxy: what its two
// entries say (log.Call, log.CallResult).
type call struct {
	server, tool string
	toolSum      string // the tool definition's hash, if known
	actor        string
	start        time.Time
	args         log.CanonicalJSON // redacted
	secrets      []string          // redacted values, scrubbed from error texts
	client       *mcp.Implementation
	protocol     string
	index        uint64 // the call entry's, once written
	entry        []byte // the call entry, once written

	duration    time.Duration
	result      json.RawMessage // the downstream result as received, if any
	resultCanon []byte          // its canonical form, if the reader made it already
	isError     bool
	errText     string
	errCode     int64
	retain      bool
	remarshal   bool // result is the SDK's re-encoding, not the wire bytes
	release     string

	expected *server.Expected // the log was told this call's result is coming
}

// announce tells the log that c's result entry is on its way, if the log
// can use that. The caller must defer c.withdraw(), so that an
// announcement is never left open (a panic, a path that does not record).
func (p *Proxy) announce(c *call) {
	if e, ok := p.opts.Log.(expecter); ok {
		c.expected = e.Expect()
	}
}

func (c *call) withdraw() {
	if c.expected != nil {
		c.expected.Cancel()
	}
}

func (d *downstream) toolHandler(front, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return d.p.callTool(ctx, d, front, tool, req)
	}
}

// callTool records one tools/call to server d, forwards it, records its
// outcome and answers. Nothing reaches the server unless the call entry
// is durable, and nothing goes back to the client unless the outcome is.
func (p *Proxy) callTool(ctx context.Context, d *downstream, front, tool string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	transport := "pipe"
	if req.Extra != nil && req.Extra.Header != nil {
		transport = "tcp"
	}
	var (
		c    *call
		rerr *jsonrpc.Error
	)
	ctx, span := p.startSpan(ctx, traceCall{front: front, meta: req.Params.Meta, session: sessionID(req.Session),
		protocol: req.ProtocolVersion(), transport: transport})
	defer func() { span.end(c, rerr) }()
	actor, err := p.actor(ctx, req)
	if err != nil {
		rerr = rpcError(jsonrpc.CodeInvalidRequest, "provlog: %v", err)
		return nil, rerr
	}
	c, rerr = p.startCall(ctx, d, front, tool, actor, start, req.Params.Arguments, nil, req.ClientInfo(), req.ProtocolVersion())
	if rerr != nil {
		return nil, rerr
	}
	defer c.withdraw()
	span.recorded(c)

	res, callErr := p.forwardCall(ctx, d, tool, req, c)
	var receipt string
	receipt, rerr = p.settle(ctx, d, c, callErr)
	if rerr != nil {
		if receipt != "" && ctx.Err() != nil {
			return nil, ctx.Err() // recorded, but cancelled by the client: nobody is listening
		}
		return nil, rerr
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[ReceiptKey] = receipt
	d.rewriteContent(res.Content)
	return res, nil
}

// sessionID is ss's id, "" for none.
func sessionID(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	return ss.ID()
}

// forwardCall makes the downstream call, filling in c's outcome.
func (p *Proxy) forwardCall(ctx context.Context, d *downstream, tool string, req *mcp.CallToolRequest, c *call) (*mcp.CallToolResult, error) {
	cs, err := d.session()
	if err != nil {
		c.isError, c.errText = true, err.Error()
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Meta: d.downMeta(req.Params.Meta)}
	p.injectTrace(ctx, params.Meta)
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	// A retry after an input_required result (SEP-2322) goes on as the
	// client sent it.
	params.InputResponses, params.RequestState = req.Params.InputResponses, req.Params.RequestState
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// Upstream tokens can collide across sessions, and arrive as
		// float64 which SetProgressToken panics on (research/mcp.md
		// §1.5.2-3), so the downstream gets a token of our own.
		down := "provlog-" + strconv.FormatUint(p.nextToken.Add(1), 10)
		params.Meta["progressToken"] = down
		p.progress.Store(down, &progressRoute{session: req.Session, token: normalizeToken(tok), ctx: ctx})
		defer p.progress.Delete(down)
	}
	id := d.calls.begin(req.Session, ctx)
	defer d.calls.end(id)

	cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	cp := &capture{}
	res, err := cs.CallTool(withCapture(cctx, cp), params)
	cp.done()
	c.result = cp.last()
	if c.result == nil && res != nil {
		// Not expected (see capture.go); hash the SDK's re-encoding
		// rather than nothing, and say so in the entry.
		c.result, _ = json.Marshal(res)
		c.remarshal = true
	}
	we := cp.remoteError()
	switch {
	case err == nil:
		c.isError = res.IsError
		return res, nil
	case we != nil:
		// The server answered with a JSON-RPC error.
		c.isError, c.errText, c.errCode = true, we.Message, we.Code
	case ctx.Err() != nil:
		c.isError, c.errText = true, "cancelled by the client"
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		c.isError, c.errText = true, fmt.Sprintf("server %q did not answer %s within %s", d.cfg.ID, tool, d.cfg.timeout())
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		c.isError, c.errText = true, fmt.Sprintf("server %q closed the connection during the call (it crashed or exited); it is being restarted", d.cfg.ID)
	default:
		c.isError, c.errText = true, fmt.Sprintf("server %q: %v", d.cfg.ID, err)
	}
	c.errText = scrub(c.errText, c.secrets)
	if we != nil {
		// The client sees the downstream's error verbatim; only the log
		// copy is scrubbed.
		return nil, we
	}
	return nil, errLocal{c.errText}
}

// release resolves server d's data release for a call that returned
// result. It never fails the call: no source, an error or a timeout
// gives "" (the resolver logs why). Answers are cached per the source's
// TTL, so most calls cost a map lookup.
func (p *Proxy) release(ctx context.Context, d *downstream, result json.RawMessage) string {
	if d.cfg.Source == nil {
		return ""
	}
	r, ok := p.releases.Load(d.cfg.ID)
	if !ok {
		nr, err := release.New(*d.cfg.Source, nil, p.logger.With("server", d.cfg.ID))
		if err != nil {
			p.logger.Warn("proxy: bad source config; no releases recorded", "server", d.cfg.ID, "error", err)
			return ""
		}
		r, _ = p.releases.LoadOrStore(d.cfg.ID, nr)
	}
	return r.(*release.Resolver).Resolve(context.WithoutCancel(ctx), result)
}

func (p *Proxy) actor(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if p.opts.Actor != nil {
		a, err := p.opts.Actor(ctx, req)
		if err == nil && a == "" {
			err = errors.New("no actor for this request")
		}
		return a, err
	}
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID, nil
	}
	return "", errors.New("no actor: the request carries no bearer token")
}

// forwardMeta copies the upstream request's _meta for the downstream
// request, without the progress token (replaced), the per-request protocol
// fields of 2026-07-28 (the downstream session has its own) and provlog's
// own keys.
func forwardMeta(m mcp.Meta) mcp.Meta {
	out := mcp.Meta{}
	for k, v := range m {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") || strings.HasPrefix(k, "dev.provlog/") {
			continue
		}
		out[k] = v
	}
	return out
}

// normalizeToken turns a JSON number token back into an integer where it
// is one, so the client gets back the token it sent.
func normalizeToken(t any) any {
	if f, ok := t.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// errLocal is a call failure of the proxy's own telling (the server is
// down, crashed, timed out), as opposed to a JSON-RPC error the server
// sent.
type errLocal struct{ text string }

func (e errLocal) Error() string { return e.text }
