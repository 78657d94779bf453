package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy/release"
)

// Bounds on what a call entry copies from untrusted peers.
const (
	maxErrorText  = 4 << 10
	maxClientText = 256
	appendTimeout = 30 * time.Second
)

// A call is one tools/call on its way through the proxy: what its entry
// will say.
type call struct {
	server, tool string
	actor        string
	start        time.Time
	args         any      // redacted
	secrets      []string // redacted values, scrubbed from error texts
	client       *mcp.Implementation
	protocol     string

	duration    time.Duration
	result      json.RawMessage // the downstream result as received, if any
	resultCanon []byte          // its canonical form, if the reader made it already
	isError     bool
	errText     string
	errCode     int64
	retain      bool
	remarshal   bool // result is the SDK's re-encoding, not the wire bytes
	release     string

	expected *server.Expected // the log was told this call's entry is coming
}

// announce tells the log that c's entry is on its way, if the log can use
// that. The caller must defer c.withdraw(), so that an announcement is
// never left open (a panic, a path that does not record).
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

func (d *downstream) toolHandler(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return d.p.callTool(ctx, d, tool, req)
	}
}

// callTool forwards one tools/call to server d and records it. The entry
// is durable before anything goes back to the client; a call that cannot
// be recorded fails, whatever the downstream answered.
func (p *Proxy) callTool(ctx context.Context, d *downstream, tool string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	actor, err := p.actor(ctx, req)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidRequest, "provlog: %v", err)
	}
	args, secrets, err := redactArgs(req.Params.Arguments, d.cfg.Redact)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: %v", err)
	}
	c := &call{
		server: d.cfg.ID, tool: tool, actor: actor, start: start,
		args: args, secrets: secrets, client: req.ClientInfo(), protocol: req.ProtocolVersion(),
		retain: d.cfg.Retain == RetainFull,
	}
	p.announce(c)
	defer c.withdraw()

	res, callErr := p.forwardCall(ctx, d, tool, req, c)
	receipt, rerr := p.settle(ctx, d, c, callErr)
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

// settle ends call c, which the downstream answered with callErr (nil:
// a result): it records c and returns its receipt's text form and, for a
// failed call, the error the client gets, carrying the receipt as its data
// unless the downstream's own error has data. If c cannot be recorded the
// receipt is "" and the error says the result is withheld.
func (p *Proxy) settle(ctx context.Context, d *downstream, c *call, callErr error) (string, *jsonrpc.Error) {
	c.duration = time.Since(c.start)
	c.release = p.release(ctx, d, c.result)
	r, err := p.record(ctx, c)
	if err != nil {
		p.logger.Error("proxy: recording a call failed; the call fails", "server", c.server, "tool", c.tool, "error", err)
		return "", rpcError(jsonrpc.CodeInternalError, "provlog: the call to %s was made but could not be recorded, so its result is withheld: %v", c.tool, err)
	}
	receipt := r.String()
	if callErr == nil {
		return receipt, nil
	}
	data, _ := json.Marshal(map[string]string{ReceiptKey: receipt})
	if we, ok := callErr.(*jsonrpc.Error); ok && ctx.Err() == nil {
		out := *we
		if len(out.Data) == 0 {
			out.Data = data
		}
		return receipt, &out
	}
	return receipt, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: " + c.errText, Data: data}
}

// forwardCall makes the downstream call, filling in c's outcome.
func (p *Proxy) forwardCall(ctx context.Context, d *downstream, tool string, req *mcp.CallToolRequest, c *call) (*mcp.CallToolResult, error) {
	cs, err := d.session()
	if err != nil {
		c.isError, c.errText = true, err.Error()
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Meta: forwardMeta(req.Params.Meta)}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// Upstream tokens can collide across sessions, and arrive as
		// float64 which SetProgressToken panics on (research/mcp.md
		// §1.5.2-3), so the downstream gets a token of our own.
		down := "provlog-" + strconv.FormatUint(p.nextToken.Add(1), 10)
		params.Meta["progressToken"] = down
		p.progress.Store(down, &progressRoute{session: req.Session, token: normalizeToken(tok), ctx: ctx})
		defer p.progress.Delete(down)
	}
	id := d.beginCall(req.Session, ctx)
	defer d.endCall(id)

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

// record writes c's call entry and returns its receipt. Blobs it writes
// for an entry that does not make it into the log are purged again.
func (p *Proxy) record(ctx context.Context, c *call) (*log.Receipt, error) {
	f := map[string]any{
		"server":      c.server,
		"tool":        c.tool,
		"args":        c.args,
		"is_error":    c.isError,
		"started":     c.start.UTC().Format(log.TimeFormat),
		"duration_ns": c.duration.Nanoseconds(),
	}
	if c.release != "" {
		f["release"] = c.release
	}
	if c.protocol != "" {
		f["protocol_version"] = truncate(c.protocol, maxClientText)
	}
	if c.client != nil {
		f["client"] = map[string]any{"name": truncate(c.client.Name, maxClientText), "version": truncate(c.client.Version, maxClientText)}
	}
	if c.errText != "" {
		f["error"] = truncate(c.errText, maxErrorText)
		if c.errCode != 0 {
			f["error_code"] = c.errCode
		}
	}
	var newBlobs []string
	put := func(b []byte) (string, error) {
		sum := blobs.Sum(b)
		if _, err := p.opts.Blobs.Get(sum); err == nil {
			return sum, nil // already there: not ours to purge
		}
		if _, err := p.opts.Blobs.Put(b); err != nil {
			return "", err
		}
		newBlobs = append(newBlobs, sum)
		return sum, nil
	}
	purge := func() {
		for _, s := range newBlobs {
			if err := p.opts.Blobs.Purge(s); err != nil {
				p.logger.Error("proxy: purging the blob of an unrecorded call", "blob", s, "error", err)
			}
		}
	}
	if c.result != nil {
		canon, err := c.resultCanon, error(nil)
		if canon == nil {
			canon, err = log.Canonicalize(c.result)
		}
		if err != nil {
			// Not I-JSON (duplicate keys, lone surrogates...): JCS cannot
			// represent it, so hash the bytes as received.
			canon = c.result
			f["result_canonical"] = false
		}
		sum := sha256.Sum256(canon)
		f["result_sha256"] = hex.EncodeToString(sum[:])
		f["result_bytes"] = len(c.result)
		if c.remarshal {
			f["result_remarshalled"] = true
		}
		if c.retain {
			if _, err := put(canon); err != nil {
				return nil, fmt.Errorf("keeping the result: %w", err)
			}
			f["result_retained"] = true
		}
	}
	e := &log.Entry{Kind: log.KindCall, Time: c.start, Actor: c.actor, Fields: f}
	b, err := e.Marshal()
	if errors.Is(err, log.ErrEntryTooLarge) {
		// Move the arguments out to a blob; the entry keeps their hash.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if eerr := enc.Encode(c.args); eerr != nil {
			purge()
			return nil, eerr
		}
		canon, cerr := log.Canonicalize(buf.Bytes())
		if cerr != nil {
			purge()
			return nil, cerr
		}
		sum := blobs.Sum(canon)
		if p.opts.Blobs != nil {
			if _, perr := put(canon); perr != nil {
				purge()
				return nil, fmt.Errorf("keeping the arguments: %w", perr)
			}
		}
		delete(f, "args")
		f["args_sha256"] = sum
		b, err = e.Marshal()
	}
	if err != nil {
		purge()
		return nil, err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	var r *log.Receipt
	if c.expected != nil {
		r, err = c.expected.Append(actx, b)
	} else {
		r, err = p.opts.Log.Append(actx, b)
	}
	if err != nil {
		purge()
		return nil, err
	}
	return r, nil
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
