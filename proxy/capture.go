package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Raw capture of downstream results.
//
// The SDK's ClientSession decodes every result into Go types: schemas
// become maps (key order lost), unknown fields are dropped and some fields
// are re-encoded differently (research/mcp.md §1.5, pitfalls 5 and 6). A
// call entry must hash the downstream result as received, and the proxy
// lists tools with their schemas as the server gave them, so the proxy
// reads results off the wire itself: a request sent with a *capture in its
// context registers its JSON-RPC id, and the response with that id has its
// "result" bytes, exactly as received, stored in the capture before the SDK
// sees the response.
//
// For stdio servers the SDK's Connection is wrapped (captureConn). Streamable
// HTTP connections cannot be wrapped that way (the SDK reaches them through
// an unexported interface), so for those the HTTP client's RoundTripper reads
// the request bodies and tees the response bodies (JSON or SSE) instead
// (captureRoundTripper).

type captureKey struct{}

// A capture collects the raw results of the requests sent with it.
type capture struct {
	mu      sync.Mutex
	pending *pendingCalls
	ids     []jsonrpc.ID
	raws    []json.RawMessage // in arrival order
	wireErr *jsonrpc.Error    // the last error response, as received
}

func withCapture(ctx context.Context, c *capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// last returns the last raw result received, or nil.
func (c *capture) last() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.raws) == 0 {
		return nil
	}
	return c.raws[len(c.raws)-1]
}

// remoteError returns the JSON-RPC error the peer answered with, if the
// last response was one. It tells a peer's error from the SDK's local
// ones, which are *jsonrpc.Error values too ("rejected by transport",
// "client is closing").
func (c *capture) remoteError() *jsonrpc.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wireErr
}

// all returns every raw result received, in order.
func (c *capture) all() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.raws...)
}

// done forgets the ids still waiting: a cancelled call never gets its
// response.
func (c *capture) done() {
	c.mu.Lock()
	p, ids := c.pending, c.ids
	c.ids = nil
	c.mu.Unlock()
	if p == nil {
		return
	}
	for _, id := range ids {
		p.m.Delete(id)
	}
}

// pendingCalls maps the ids of captured requests on one connection to
// their captures, and those of its subscriptions/listen requests to the
// URIs they listen for, if refused is set.
type pendingCalls struct {
	m sync.Map // jsonrpc.ID -> *capture or listenURIs
	// refused, if set, is told the error a listen was answered with
	// (listens.refused): go-sdk sends a listen without waiting for its
	// answer, and discards it.
	refused func(uris []string, err *jsonrpc.Error)
}

// listenURIs are the resources a subscriptions/listen request listens for.
type listenURIs []string

const methodListen = "subscriptions/listen"

// register notes a request about to be sent, if ctx carries a capture or
// it is a listen whose refusal is wanted.
func (p *pendingCalls) register(ctx context.Context, msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return
	}
	if req.Method == methodListen && p.refused != nil {
		var params mcp.SubscriptionsListenParams
		if json.Unmarshal(req.Params, &params) == nil && params.Notifications != nil && len(params.Notifications.ResourceSubscriptions) > 0 {
			p.m.Store(req.ID, listenURIs(params.Notifications.ResourceSubscriptions))
		}
		return
	}
	cp, ok := ctx.Value(captureKey{}).(*capture)
	if !ok {
		return
	}
	cp.mu.Lock()
	cp.pending = p
	cp.ids = append(cp.ids, req.ID)
	cp.mu.Unlock()
	p.m.Store(req.ID, cp)
}

// deliver stores a response's raw result in its capture, if any, and
// tells a listen's refusal.
func (p *pendingCalls) deliver(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	v, ok := p.m.LoadAndDelete(resp.ID)
	if !ok {
		return
	}
	var we *jsonrpc.Error
	switch {
	case resp.Error == nil:
	case errors.As(resp.Error, &we):
	default:
		we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
	}
	if uris, ok := v.(listenURIs); ok {
		if we != nil {
			p.refused(uris, we)
		}
		return
	}
	cp := v.(*capture)
	cp.mu.Lock()
	if resp.Error == nil {
		cp.raws = append(cp.raws, bytes.Clone(resp.Result))
	}
	cp.wireErr = we
	cp.mu.Unlock()
}

// captureTransport wraps a stdio (or in-memory) downstream transport.
type captureTransport struct {
	inner   mcp.Transport
	refused func(uris []string, err *jsonrpc.Error) // see pendingCalls
	// notify, if set, is offered each notification as it is read, before
	// any message after it reaches the SDK, and reports whether it
	// handled it (then the SDK never sees it). The SDK hands
	// notifications to a goroutine of their own while a response goes
	// straight to its caller, so a server's progress written before its
	// result often came after it, and was dropped as late.
	notify func(*jsonrpc.Request) bool
}

func (t *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cc := &captureConn{Connection: c, notify: t.notify}
	cc.pending.refused = t.refused
	return cc, nil
}

type captureConn struct {
	mcp.Connection
	pending pendingCalls
	notify  func(*jsonrpc.Request) bool
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	// Registered before the write, so the response cannot beat it.
	c.pending.register(ctx, msg)
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && c.notify != nil && c.notify(req) {
			continue
		}
		c.pending.deliver(msg)
		return msg, nil
	}
}

// captureRoundTripper captures results for a streamable HTTP downstream,
// and adds the configured headers to every request.
type captureRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	pending pendingCalls
}

func (t *captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	configHeaders(t.headers, req.Header.Set)
	// Only the answer to a captured request or a listen, or a resumed
	// stream (which may carry one), is read through: decoding every
	// message twice would double the client's work.
	tee := req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != ""
	if req.Method == http.MethodPost && req.GetBody != nil {
		_, captured := req.Context().Value(captureKey{}).(*capture)
		// The Mcp-Method header names a 2026-07-28 request's method.
		listen := t.pending.refused != nil && req.Header.Get("Mcp-Method") == methodListen
		if captured || listen {
			if body, err := req.GetBody(); err == nil {
				b, _ := io.ReadAll(body)
				body.Close()
				if msg, err := jsonrpc.DecodeMessage(b); err == nil {
					t.pending.register(req.Context(), msg)
					tee = true
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil || !tee {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &jsonTee{ReadCloser: resp.Body, pending: &t.pending}
	case "text/event-stream":
		resp.Body = &sseTee{ReadCloser: resp.Body, pending: &t.pending}
	}
	return resp, nil
}

// jsonTee reads a JSON response body through and delivers the message it
// holds when the body ends, before the reader sees the end (the SDK reads
// such bodies with io.ReadAll).
type jsonTee struct {
	io.ReadCloser
	pending *pendingCalls
	buf     []byte
	done    bool
}

func (j *jsonTee) Read(p []byte) (int, error) {
	n, err := j.ReadCloser.Read(p)
	if !j.done {
		j.buf = append(j.buf, p[:n]...)
		if err != nil {
			j.done = true
			if msg, derr := jsonrpc.DecodeMessage(j.buf); derr == nil {
				j.pending.deliver(msg)
			}
			j.buf = nil
		}
	}
	return n, err
}

// sseTee reads a server-sent event stream through, delivering each
// event's message as soon as the event is complete, before the reader sees
// the blank line that completes it.
type sseTee struct {
	io.ReadCloser
	pending *pendingCalls
	events  sseParser
}

func (s *sseTee) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.events.feed(p[:n], s.deliver)
	return n, err
}

func (s *sseTee) deliver(data []byte) bool {
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		s.pending.deliver(msg)
	}
	return true
}
