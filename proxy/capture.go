package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

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
	raw     json.RawMessage // the last result received, as received
	wireErr *jsonrpc.Error  // the last error response, as received
	empty   bool            // the last response held neither a result nor an error
	canon   []byte          // the last raw result's canonical form, if its reader made it (stdioConn)
	unread  error           // why the last response could not be read (stdioConn, the HTTP tees)
	// taken: the results are the capture's alone. A stdio server's
	// answer with one is not given to go-sdk, which would decode it into
	// its types only for the caller to judge the result as received;
	// go-sdk gets an error answer in its place (errTaken).
	taken bool
}

// errTaken stands in, for go-sdk, for a result a capture took.
var errTaken = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: the result was taken as received"}

func withCapture(ctx context.Context, c *capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// last returns the last raw result received, or nil.
func (c *capture) last() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw
}

// lastCanon returns the canonical form of the last raw result, if its
// reader made it.
func (c *capture) lastCanon() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.canon
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

// errNoResult is what was wrong with a server's answer that held neither
// a result nor an error: go-sdk fails the request with its decoding of
// nothing ("EOF"), which reads as a connection that ended.
var errNoResult = errors.New("its answer holds neither a result nor an error")

// answerError is err, the error a request sent with c failed with, or
// errNoResult if it failed because the server's answer held nothing.
func (c *capture) answerError(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.empty && err != nil && !endedByContext(err) {
		return errNoResult
	}
	return err
}

// unreadable returns why the last response could not be read, if it
// could not.
func (c *capture) unreadable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unread
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
	listenHooks
}

// listenHooks are told of a connection's subscriptions/listen requests
// for resources.
type listenHooks struct {
	// sent, if set, is told each listen's request id as it is about to
	// be sent, so that its acknowledgement, which names the id, is told
	// from another's (listens.sent): go-sdk keeps the id to itself.
	sent func(id jsonrpc.ID, uris []string)
	// refused, if set, is told why a listen ended unanswered or was
	// answered with an error (listens.refused): go-sdk sends a listen
	// without waiting for its answer, and discards it.
	refused func(uris []string, err error)
}

// listenURIs are the resources a subscriptions/listen request listens for.
type listenURIs []string

const methodListen = "subscriptions/listen"

// register notes a request about to be sent, if ctx carries a capture or
// it is a listen whose refusal is wanted, and reports whether it did and
// whether it was such a listen.
func (p *pendingCalls) register(ctx context.Context, msg jsonrpc.Message) (noted, listen bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return false, false
	}
	if req.Method == methodListen && p.refused != nil {
		var params mcp.SubscriptionsListenParams
		if json.Unmarshal(req.Params, &params) == nil && params.Notifications != nil && len(params.Notifications.ResourceSubscriptions) > 0 {
			uris := params.Notifications.ResourceSubscriptions
			p.m.Store(req.ID, listenURIs(uris))
			if p.sent != nil {
				p.sent(req.ID, uris)
			}
			return true, true
		}
		// A listen for the lists' changes only: go-sdk's own, which
		// nobody waits on.
		return false, false
	}
	cp, ok := ctx.Value(captureKey{}).(*capture)
	if !ok {
		return false, false
	}
	cp.mu.Lock()
	cp.pending = p
	cp.ids = append(cp.ids, req.ID)
	cp.mu.Unlock()
	p.m.Store(req.ID, cp)
	return true, false
}

// deliver stores a response's raw result in its capture, if any, with
// its canonical form if the reader made it, and tells a listen's refusal.
// It returns the capture.
func (p *pendingCalls) deliver(msg jsonrpc.Message, canon []byte) *capture {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return nil
	}
	v, ok := p.m.LoadAndDelete(resp.ID)
	if !ok {
		return nil
	}
	var we *jsonrpc.Error
	switch {
	case resp.Error == nil:
	case errors.As(resp.Error, &we):
	default:
		we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
	}
	if uris, ok := v.(listenURIs); ok {
		// A listen's answer is its end: the server holds it no more.
		if we != nil {
			p.refused(uris, fmt.Errorf("the server refused the subscription: %w", we))
		} else {
			p.refused(uris, errors.New("the server ended the subscription"))
		}
		return nil
	}
	cp := v.(*capture)
	cp.mu.Lock()
	if resp.Error == nil {
		// The result is the message's own: parseWire and go-sdk's
		// jsonrpc decoding (a RawMessage is copied) each make it afresh,
		// and no one writes to it.
		cp.raw, cp.canon = resp.Result, canon
	}
	cp.wireErr, cp.empty = we, resp.Error == nil && resp.Result == nil
	cp.mu.Unlock()
	return cp
}

// held stores h, the answer to id that go-sdk was kept from (heldDeep),
// in its capture, if any: as received, or why it could not be read.
func (p *pendingCalls) held(id jsonrpc.ID, h heldAnswer) {
	if h.msg != nil {
		p.deliver(h.msg, nil)
		return
	}
	if v, ok := p.m.LoadAndDelete(id); ok {
		if cp, ok := v.(*capture); ok {
			cp.mu.Lock()
			cp.unread = h.err
			cp.mu.Unlock()
		}
	}
}

// endListen tells err as the end of the listen id, unless it was answered.
func (p *pendingCalls) endListen(id jsonrpc.ID, err error) {
	if v, ok := p.m.LoadAndDelete(id); ok {
		if uris, ok := v.(listenURIs); ok {
			p.refused(uris, err)
		}
	}
}

// captureTransport wraps a stdio (or in-memory) downstream transport.
type captureTransport struct {
	inner   mcp.Transport
	listens listenHooks
	asks    *askBudget
	// notify, if set, is offered each notification as it is read, before
	// any message after it reaches the SDK, and reports whether it
	// handled it (then the SDK never sees it). The SDK hands
	// notifications to a goroutine of their own while a response goes
	// straight to its caller, so a server's progress written before its
	// result often came after it, and was dropped as late.
	notify func(*jsonrpc.Request) bool
	// cmd is a stdio server's process, whose exit ends the connection
	// (exitWatch).
	cmd *process
	// ended, if set, is called once the connection's read failed: the
	// session is no use any more, though closing it may take a while.
	ended func()
}

func (t *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cc := &captureConn{Connection: c, notify: t.notify, ended: t.ended, asks: t.asks}
	cc.stdio, _ = c.(*stdioConn)
	cc.pending.listenHooks = t.listens
	if canWatchExit && t.cmd != nil && t.cmd.Process != nil {
		cc.exit = watchExit(t.cmd.Process.Pid)
	}
	return cc, nil
}

type captureConn struct {
	mcp.Connection
	pending pendingCalls
	notify  func(*jsonrpc.Request) bool
	exit    *exitWatch // a stdio server's
	stdio   *stdioConn // a stdio server's
	asks    *askBudget // captureTransport's
	ended   func()     // captureTransport's
	endOnce sync.Once
}

func (c *captureConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	// Registered before the write, so the response cannot beat it.
	c.pending.register(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.asks.answered(askKey{id: r.ID})
	}
	return c.Connection.Write(ctx, msg)
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	rctx := ctx
	if c.exit != nil {
		rctx = c.exit.readCtx(ctx)
	}
	for {
		var d downRead
		var err error
		if c.stdio != nil {
			d, err = c.stdio.read(rctx)
		} else {
			d.msg, err = c.Connection.Read(rctx)
		}
		msg := d.msg
		if err != nil && c.ended != nil && ctx.Err() == nil {
			c.endOnce.Do(c.ended)
		}
		if err != nil {
			if c.exit != nil && c.exit.gone.Err() != nil && ctx.Err() == nil {
				// The server's process exited: the end of its
				// output, whoever else holds the pipe.
				return nil, io.EOF
			}
			return msg, err
		}
		if c.exit != nil {
			c.exit.read()
		}
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && c.notify != nil && c.notify(req) {
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if ok, refuse := c.asks.admit(askKey{id: req.ID}, time.Now()); !ok {
				if refuse {
					if err := c.Connection.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errAsks}}); err != nil {
						return nil, err
					}
				}
				continue
			}
		}
		r, ok := msg.(*jsonrpc.Response)
		switch {
		case !ok:
		case d.unread != nil:
			// go-sdk reads the error that stands in for the answer;
			// the capture, why it could not be read.
			c.pending.held(r.ID, heldAnswer{err: d.unread})
		default:
			if cp := c.pending.deliver(r, d.canon); cp != nil && cp.taken && r.Error == nil && r.Result != nil {
				return &jsonrpc.Response{ID: r.ID, Error: errTaken}, nil
			}
		}
		return msg, nil
	}
}

// captureRoundTripper captures results for a streamable HTTP downstream,
// and adds the configured headers to every request.
type captureRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	pending pendingCalls
	asks    *askBudget // of the server's requests on the streams go-sdk reads
}

func (t *captureRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	configHeaders(t.headers, req.Header.Set)
	// Only the answer to a captured request or a listen, or a resumed
	// stream (which may carry one), is read through and decoded: decoding
	// every message twice would double the client's work.
	tee := req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") != ""
	var listen jsonrpc.ID // the listen sent, if it is one whose refusal is wanted
	var call jsonrpc.ID   // the captured call sent, whose answer a tee may stand in for
	if req.Method == http.MethodPost && req.GetBody != nil {
		_, captured := req.Context().Value(captureKey{}).(*capture)
		// The Mcp-Method header names a 2026-07-28 request's method.
		listening := t.pending.refused != nil && req.Header.Get("Mcp-Method") == methodListen
		// go-sdk's answer to a server's request is looked for only while
		// one awaits it.
		if captured || listening || t.asks.waiting() {
			if body, err := req.GetBody(); err == nil {
				b, _ := io.ReadAll(body)
				body.Close()
				if msg, err := jsonrpc.DecodeMessage(b); err == nil {
					if r, ok := msg.(*jsonrpc.Response); ok {
						t.asks.answered(askKey{id: r.ID})
					}
					var isListen bool
					if tee, isListen = t.pending.register(req.Context(), msg); isListen {
						listen = msg.(*jsonrpc.Request).ID
					} else if tee {
						call = msg.(*jsonrpc.Request).ID
					}
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if listen.IsValid() && !t.listenAnswered(req.Context(), listen, resp, err) {
		return resp, err
	}
	// Any other POST's answer, and a stream of the server's messages
	// (GET), is read through for its depth alone: a message nested deeper
	// than go-sdk reads would end its connection.
	depthOnly := !tee && (req.Method == http.MethodPost || req.Method == http.MethodGet)
	if err != nil || resp.Body == nil || !tee && !depthOnly {
		return resp, err
	}
	ls := listenStream{id: listen, ctx: req.Context()}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &jsonTee{ReadCloser: resp.Body, pending: &t.pending, listen: ls, call: call, depthOnly: depthOnly}
	case "text/event-stream":
		resp.Body = &sseTee{ReadCloser: resp.Body, pending: &t.pending, listen: ls, call: call, depthOnly: depthOnly, asks: t.asks}
	}
	return resp, nil
}

// maxRefusalBody bounds what of the body of a listen's HTTP error is read
// to find a JSON-RPC error in it: one is a few hundred bytes.
const maxRefusalBody = 64 << 10

// listenAnswered looks at the HTTP answer to the listen id (resp, or err
// if none came), and reports whether its body is to be read through for
// the listen's answer. Any other answer go-sdk gives up on without a word
// to the session (it takes the failed POST of a listen for a rejected
// write), so the listen is ended here: with the server's JSON-RPC error if
// the body of an HTTP error holds one for it, otherwise with the status
// alone (an error page may quote what it was sent; it is not passed on).
// go-sdk retries no listen; provlog gives it no OAuth handler, which would
// retry a 401 or 403.
func (t *captureRoundTripper) listenAnswered(ctx context.Context, id jsonrpc.ID, resp *http.Response, err error) bool {
	switch {
	case err != nil:
		if ctx.Err() == nil { // else ended by the session
			t.pending.endListen(id, errors.New("the connection to the server failed before it answered the subscription"))
		}
		return false
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		head, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
		resp.Body = prefixedBody{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		if msg, err := jsonrpc.DecodeMessage(head); err == nil {
			if r, ok := msg.(*jsonrpc.Response); ok && r.ID == id && r.Error != nil {
				t.pending.deliver(msg, nil)
			}
		}
		t.pending.endListen(id, fmt.Errorf("the server refused the subscription: HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)))
		return false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" && mt != "application/json" {
		t.pending.endListen(id, fmt.Errorf("the server answered the subscription with HTTP %d %s and no event stream", resp.StatusCode, http.StatusText(resp.StatusCode)))
		return false
	}
	return true
}

// prefixedBody is a response body of which a head was read ahead.
type prefixedBody struct {
	io.Reader
	io.Closer
}

// A listenStream is the listen a response body answers, if any.
type listenStream struct {
	id  jsonrpc.ID      // not valid if the body answers no listen
	ctx context.Context // the listen's request's
}

// ended ends the listen, unless answered, once its body ended while the
// session still wanted it: the server holds none of its URIs any more.
func (l listenStream) ended(p *pendingCalls, why string) {
	if l.id.IsValid() && l.ctx.Err() == nil {
		p.endListen(l.id, errors.New(why))
	}
}

// namesMethod reports whether data, a JSON-RPC message, is an object with
// a top-level member "method", which go-sdk reads as a request or a
// notification whatever else it holds (or not at all, if it is not JSON).
// False is also "not sure" (topMember), for which the message is decoded.
func namesMethod(data []byte) bool {
	_, ok := topMember(data, "method")
	return ok
}

// topMember returns the value of the top-level member name of data, a
// JSON object, as it stands there, and whether it found it (an empty
// value if it does not end); not finding it is also "not sure" (broken
// JSON before it). See topMemberAt.
func topMember(data []byte, name string) ([]byte, bool) {
	at, v, end := topMemberAt(data, name)
	if at < 0 {
		return nil, false
	}
	if end < 0 {
		return nil, true
	}
	return data[v:end], true
}

// topMemberAt finds the first top-level member name of data, a JSON
// object as received (white space and escapes as its writer chose; a key
// with an escape is decoded to be compared, as go-sdk reads it): at is
// where its key's quote is, v where its value begins and end just past
// it (-1 if it does not end). at is -1 if data has no such member, or is
// no JSON object as far as it was read. The values before the member are
// read only to their ends, however deep they nest: one pass, linear in
// data.
func topMemberAt(data []byte, name string) (at, v, end int) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return -1, -1, -1
	}
	for {
		i = skipSpace(data, i+1)
		if i == len(data) || data[i] != '"' {
			return -1, -1, -1
		}
		kend := skipString(data, i)
		if kend < 0 {
			return -1, -1, -1
		}
		colon := skipSpace(data, kend+1)
		if colon == len(data) || data[colon] != ':' {
			return -1, -1, -1
		}
		v = skipSpace(data, colon+1)
		end = skipValue(data, v)
		if keyIs(data[i:kend+1], name) {
			return i, v, end
		}
		if end < 0 {
			return -1, -1, -1
		}
		if i = skipSpace(data, end); i == len(data) || data[i] != ',' {
			return -1, -1, -1
		}
	}
}

// skipSpace returns the index of the first byte of data from i on that
// is not JSON white space, or len(data).
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index of the quote that ends the JSON string
// whose opening quote is data[i], or -1 if it does not end in data
// (stringEnd).
func skipString(data []byte, i int) int {
	if end := stringEnd(data, i+1); end < len(data) {
		return end
	}
	return -1
}

// skipValue returns the index just past the JSON value that begins at
// data[i], or -1 if it does not end in data. It follows strings and
// nesting only; the value is not checked (go-sdk's decoding does that).
func skipValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			if i = skipString(data, i); i < 0 {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth < 0 {
				return i // a scalar's end: its object's
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i // a scalar's end
			}
			continue
		default:
			continue
		}
		if depth == 0 {
			return i + 1
		}
	}
	return -1
}
