package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path's downstream half: one tools/call to a streamable HTTP
// server, made as a plain POST on the session the SDK's client opened
// (same session id, protocol version and headers), its answer read as JSON
// or as an event stream. The result's bytes are the ones the call entry
// hashes, as received.

// streamEndWait bounds the wait for the end of a call's event stream once
// its answer has arrived.
const streamEndWait = 100 * time.Millisecond

// errSessionGone marks a downstream failure after which the SDK's session
// is no use: the proxy closes it, and the supervisor reconnects.
var errSessionGone = errors.New("connection lost")

// errResumeGone marks a call's event stream whose resumption the server
// answered 404: it forgot the session after the call was sent, so the
// call's outcome is unknown (it may have run) and it is never sent again;
// the session is lost, as a connection cut during the call is.
var errResumeGone = errors.New("the server no longer knows the session (HTTP 404)")

// postCall makes in's call to a stateful HTTP server as one POST on the
// session the SDK's client opened, and reads its answer off the wire.
// ic is the calling front session and the call's context: requests and
// notifications the server sends on the call's stream go there.
func (d *downstream) postCall(ctx context.Context, cs *mcp.ClientSession, in *callIn, meta mcp.Meta, ic *inflightCall) outcome {
	id := append(strconv.AppendUint(append(make([]byte, 0, 32), `"provlog-`...), d.p.nextToken.Add(1), 10), '"')
	reqID := string(id)
	bp := requestBufs.Get().(*[]byte)
	defer requestBufs.Put(bp)
	b, err := appendCallParams(appendRequestHead((*bp)[:0], id, "tools/call"), in.tool, in.params, meta)
	if err != nil {
		return outcome{err: err}
	}
	b = append(b, '}')
	if cap(b) <= 64<<10 {
		*bp = b // keep a small buffer for the next call
	}
	msg, err := d.post(ctx, cs, b, reqID, ic)
	switch {
	case err == nil && msg.Error != nil:
		return outcome{wireErr: msg.Error}
	case err == nil:
		return outcome{result: msg.Result, resultCanon: msg.resultCanon, isError: msg.isError}
	case ctx.Err() != nil:
		// Given up (cancelled or timed out): tell the server.
		d.notifyCancelled(cs, reqID, "cancelled by the client")
	}
	return outcome{err: err, gone: errors.Is(err, errSessionGone), lost: errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errResumeGone)}
}

// requestBufs are postCall's request buffers: a request's bytes are not
// kept once post has returned (roundTrip's net/http client gets a copy).
var requestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// appendCallParams appends the params of a downstream tools/call: the
// tool's name there, the arguments as received, meta (if any) and a
// SEP-2322 retry's members as the client sent them.
func appendCallParams(b []byte, tool string, in *mcp.CallToolParamsRaw, meta mcp.Meta) ([]byte, error) {
	b = appendJSONString(append(b, `{"name":`...), tool)
	if len(in.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		b = append(b, in.Arguments...)
	}
	for _, m := range []struct {
		key   string
		v     any
		empty bool
	}{{"_meta", meta, len(meta) == 0}, {"inputResponses", in.InputResponses, len(in.InputResponses) == 0}, {"requestState", in.RequestState, in.RequestState == ""}} {
		if m.empty {
			continue
		}
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, fmt.Errorf("the call's %s cannot be sent: %v", m.key, err)
		}
		b = append(appendJSONString(append(b, ','), m.key), ':')
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// acceptBoth is the Accept header of every POST: streamable HTTP servers
// may answer with JSON or an event stream.
const acceptBoth = "application/json, text/event-stream"

// fixedHeaders are set by the proxy on every POST, whatever the config says.
var fixedHeaders = map[string]bool{
	"Content-Type": true, "Accept": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true,
	"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Host": true,
}

// postHeaders calls set with each header of a POST on cs's session (nil:
// the headers that do not depend on the session): the configured ones
// but those the proxy sets itself, then the fixed ones. Every request to
// an HTTP server gets its headers from here: the proxy's own connections
// (http1.go), net/http's client, and the SDK's client (captureRoundTripper).
func postHeaders(headers map[string]string, cs *mcp.ClientSession, set func(k, v string)) {
	configHeaders(headers, set)
	set("Content-Type", "application/json")
	set("Accept", acceptBoth)
	if cs == nil {
		return
	}
	if id := cs.ID(); id != "" {
		set("Mcp-Session-Id", id)
	}
	if r := cs.InitializeResult(); r != nil && r.ProtocolVersion != "" {
		set("Mcp-Protocol-Version", r.ProtocolVersion)
	}
}

// configHeaders calls set with each configured header the proxy does not
// set itself.
func configHeaders(headers map[string]string, set func(k, v string)) {
	for k, v := range headers {
		if !fixedHeaders[http.CanonicalHeaderKey(k)] {
			set(k, v)
		}
	}
}

// renderHeader writes a server's configured headers, and the fixed ones
// that do not depend on the session, as HTTP/1.1 header lines.
func renderHeader(headers map[string]string) ([]byte, error) {
	for k, v := range headers {
		if !validHeaderName(k) || !validHeaderValue(v) {
			return nil, fmt.Errorf("header %q: invalid name or value", k)
		}
	}
	return appendHeaders(nil, headers, nil), nil
}

// appendHeaders appends postHeaders' lines.
func appendHeaders(b []byte, headers map[string]string, cs *mcp.ClientSession) []byte {
	postHeaders(headers, cs, func(k, v string) {
		b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
	})
	return b
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName[T string | []byte](s T) bool {
	if len(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// roundTrip POSTs body on cs's session: over the proxy's own connections
// for a plain-HTTP server, else with net/http's client. The response's
// body must be closed.
func (d *downstream) roundTrip(ctx context.Context, cs *mcp.ClientSession, body []byte) (*http.Response, error) {
	if d.http1 != nil {
		// The configured lines were checked and rendered once (http1Header);
		// the session's are checked here, as the server chose them.
		h := make([]byte, 0, len(d.http1Header)+128)
		h = append(h, d.http1Header...)
		ok := true
		postHeaders(nil, cs, func(k, v string) {
			if k == "Mcp-Session-Id" || k == "Mcp-Protocol-Version" {
				ok = ok && validHeaderValue(v)
				h = append(append(append(append(h, k...), ": "...), v...), "\r\n"...)
			}
		})
		if ok {
			return d.http1.post(ctx, h, body)
		}
	}
	// net/http's client may read the body after Do has returned: its own copy.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(bytes.Clone(body)))
	if err != nil {
		return nil, err
	}
	postHeaders(d.cfg.Headers, cs, req.Header.Set)
	return d.httpClient.Do(req)
}

// send POSTs body on cs's session and reads the answer to its end.
func (d *downstream) send(ctx context.Context, cs *mcp.ClientSession, body []byte) error {
	resp, err := d.roundTrip(ctx, cs, body)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// post sends the request body (whose id is reqID) and returns the
// response to it. Requests and notifications the server sends on the
// response stream are served on the way (see onStream).
func (d *downstream) post(ctx context.Context, cs *mcp.ClientSession, body []byte, reqID string, ic *inflightCall) (*wireMessage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := d.roundTrip(ctx, cs, body)
	if err != nil {
		if ctx.Err() == nil {
			var oe *net.OpError
			if errors.As(err, &oe) && oe.Op == "dial" {
				return nil, fmt.Errorf("%w: %v", errSessionGone, err)
			}
		}
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: the server no longer knows the session (HTTP 404)", errSessionGone)
	default:
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			// Not followed: the request would be recorded as sent to the
			// configured URL. The operator changes the config instead.
			return nil, fmt.Errorf("HTTP %d: the server redirects to %s; put that URL in the config (redirects are not followed)", resp.StatusCode, truncate(loc, 200))
		}
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(snippet))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		// Held to the bound of an event's, and of a message's on a stdio
		// connection: a body without end was held whole.
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxEventBytes+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxEventBytes {
			return nil, fmt.Errorf("the answer is over %d MiB; it is given up", maxEventBytes>>20)
		}
		msg, err := parseWire(b)
		if err != nil {
			return nil, fmt.Errorf("the answer is not a JSON-RPC message the proxy can read: %v", err)
		}
		if string(msg.ID) != reqID {
			return nil, fmt.Errorf("the answer is for request %s, not %s", msg.ID, reqID)
		}
		return msg, nil
	case "text/event-stream":
		return d.readCall(ctx, cancel, cs, resp, reqID, ic)
	default:
		return nil, fmt.Errorf("unexpected answer of type %q", resp.Header.Get("Content-Type"))
	}
}

// maxResumes bounds the resumptions of a call's event stream in a row
// that bring no new event.
const maxResumes = 3

// readCall reads a call's event stream to the answer to reqID, serving
// the server's requests and notifications on the way (onStream). A stream
// that ends without the answer after giving an event id is resumed as a
// client resumes one (SEP-1699): a GET with Last-Event-ID after the
// reconnection time the server set (else a second), at most maxResumes
// times in a row without a new event. When the server closed the stream
// on purpose (a retry field, then a clean end: SSE polling), the client's
// own stream of the call, if it can be resumed, is closed the same way
// (callStream.pause).
func (d *downstream) readCall(ctx context.Context, cancel context.CancelFunc, cs *mcp.ClientSession, resp *http.Response, reqID string, ic *inflightCall) (_ *wireMessage, err error) {
	ev := &callEvents{d: d, ctx: ctx, cs: cs, ic: ic, reqID: reqID}
	defer func() {
		if err != nil && ev.stray != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (the stream carried an answer to request %s, not to this call's %s)", err, truncate(string(ev.stray), 64), reqID)
		}
		if err != nil && ev.unread != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (an event of the stream is not a JSON-RPC message the proxy can read: %v)", err, ev.unread)
		}
	}()
	var sp sseParser
	// The events' data are read into a pooled buffer: parseWire keeps
	// nothing of it.
	bp := eventDataBufs.Get().(*[]byte)
	sp.data = (*bp)[:0]
	defer func() {
		if cap(sp.data) <= 64<<10 {
			*bp = sp.data[:0]
		}
		eventDataBufs.Put(bp)
	}()
	retry, tries := time.Second, 0
	for {
		ev.answer = nil
		before := string(sp.lastID)
		sp.hasRetry = false
		err := sp.read(resp.Body, ev.event)
		if answer := ev.answer; answer != nil {
			// The server ends the stream after its answer; read that end,
			// so the connection goes back to the pool rather than being
			// closed (a body closed early cannot be reused). A server
			// that keeps the stream open loses the connection instead.
			t := time.AfterFunc(streamEndWait, cancel)
			io.Copy(io.Discard, resp.Body)
			t.Stop()
			resp.Body.Close()
			return answer, nil
		}
		resp.Body.Close()
		polled := err == nil && sp.hasRetry
		if sp.hasRetry {
			retry = time.Duration(sp.retry) * time.Millisecond
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errEventTooBig):
			return nil, fmt.Errorf("the call's event stream: %w", err)
		case len(sp.lastID) == 0 && polled:
			return nil, errors.New("the server closed the call's event stream without an event id to resume it from, so its answer cannot be had")
		case len(sp.lastID) == 0 && err == nil && ev.unread != nil:
			// The server ended the stream, alive, having sent what may
			// have been its answer: the call failed, the connection did
			// not (unread is told by the defer).
			return nil, errors.New("the event stream ended without an answer")
		case len(sp.lastID) == 0:
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("the event stream ended without an answer: %w", err)
		case string(sp.lastID) == before:
			if tries++; tries >= maxResumes {
				return nil, fmt.Errorf("the event stream ended without an answer %d times in a row after event %q", tries+1, sp.lastID)
			}
		default:
			tries = 0
		}
		if cst, ok := ctx.Value(callStreamKey{}).(*callStream); ok && polled {
			cst.pause(retry)
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if resp, err = d.resumeGET(ctx, cs, string(sp.lastID)); err != nil {
			return nil, fmt.Errorf("resuming the call's event stream after event %q: %w", sp.lastID, err)
		}
	}
}

// callEvents takes the events of a call's stream for readCall: the answer
// to reqID, the server's requests and notifications on the way
// (onStream), and what else the stream held, for the error if no answer
// comes.
type callEvents struct {
	d      *downstream
	ctx    context.Context
	cs     *mcp.ClientSession
	ic     *inflightCall
	reqID  string
	answer *wireMessage
	stray  []byte // the id of an answer to another request the stream carried
	unread error  // why the first event that held a JSON object or array was no message (nesting past encoding/json's bound, a batch)
}

// event takes one event's data, reporting whether to read on.
func (e *callEvents) event(data []byte) bool {
	if len(bytes.TrimSpace(data)) == 0 {
		return true // a priming event (an id, no data), which every call of npm's servers opens with
	}
	msg, err := parseWire(data)
	if err != nil {
		// Not a message (a priming event, say): skip it, as the SDK
		// does; but an object (or a batch) may have been the answer.
		if d := bytes.TrimSpace(data); e.unread == nil && (d[0] == '{' || d[0] == '[') {
			e.unread = err
		}
		return true
	}
	if msg.Method == "" {
		if string(msg.ID) == e.reqID {
			e.answer = msg
			return false
		}
		e.stray = append(e.stray[:0], msg.ID...)
		return true
	}
	if msg.ID == nil {
		e.d.onStream(e.ctx, e.cs, e.ic, msg)
		return true
	}
	asks, k := e.d.asks.Load(), askKey{on: e.reqID, id: wireID(msg.ID)}
	ok, refuse := asks.admit(k, time.Now())
	if ok {
		e.d.onStream(e.ctx, e.cs, e.ic, msg)
		asks.answered(k)
	} else if refuse {
		asks.refuse(msg.ID)
	}
	return true
}

// eventDataBufs are readCall's buffers of an event's data.
var eventDataBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// resumeGET asks the server for the events of a stream after lastID.
func (d *downstream) resumeGET(ctx context.Context, cs *mcp.ClientSession, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	postHeaders(d.cfg.Headers, cs, req.Header.Set)
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	resp, err := d.httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil, errResumeGone
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), bytes.TrimSpace(snippet))
	}
	return resp, nil
}

// onStream serves a request or notification the server sent on a call's
// stream: it belongs to that call, so it goes to the calling session, on
// the call's own stream where the front has one. The SDK's client hands
// the same messages sent outside a call's stream to the same functions
// (forward.go), which then have to guess the call.
func (d *downstream) onStream(ctx context.Context, cs *mcp.ClientSession, ic *inflightCall, msg *wireMessage) {
	if msg.ID == nil {
		switch msg.Method {
		case "notifications/message":
			var params mcp.LoggingMessageParams
			if json.Unmarshal(msg.Params, &params) == nil {
				d.logTo(ic, &params)
			}
		case "notifications/progress":
			var params mcp.ProgressNotificationParams
			if json.Unmarshal(msg.Params, &params) == nil {
				d.p.routeProgress(ctx, &params)
			}
		case "notifications/tools/list_changed":
			d.cat.triggerResync(toolSlot)
		case "notifications/prompts/list_changed":
			d.cat.triggerResync(promptSlot)
		case "notifications/resources/list_changed":
			d.cat.triggerResync(resourceSlot, templateSlot)
		case "notifications/resources/updated":
			var params mcp.ResourceUpdatedNotificationParams
			if json.Unmarshal(msg.Params, &params) == nil {
				d.resourceUpdated(ctx, &mcp.ResourceUpdatedNotificationRequest{Params: &params})
			}
		}
		return
	}
	var b []byte
	raw, err := d.serveRequest(ctx, ic, msg)
	var rerr *jsonrpc.Error
	if err != nil {
		rerr = asRPCError(err)
	}
	b = appendResponse(b, msg.ID, raw, rerr)
	if err := d.send(ctx, cs, b); err != nil {
		// The error may quote what the server made of the answer (a bad
		// response head): scrubbed of it, the call's values included.
		var call *callSecrets
		if ic != nil {
			call = ic.secrets
		}
		d.p.logger.Warn("proxy: answering a server's request failed", "server", d.cfg.ID, "method", msg.Method, "error", d.logText(err.Error(), call))
	}
}

// serveRequest answers a server-to-client request made on a call's
// stream by asking the calling session's client.
func (d *downstream) serveRequest(ctx context.Context, ic *inflightCall, msg *wireMessage) (json.RawMessage, error) {
	switch msg.Method {
	case "ping":
		return json.RawMessage("{}"), nil
	case "sampling/createMessage":
		var params mcp.CreateMessageParams
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: %v", err)
		}
		return d.askClient(ctx, ic, msg.Method, &params)
	case "elicitation/create":
		var params mcp.ElicitParams
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: %v", err)
		}
		return d.askClient(ctx, ic, msg.Method, &params)
	}
	return nil, rpcError(jsonrpc.CodeMethodNotFound, "provlog: method %q is not offered to servers", msg.Method)
}

func asRPCError(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// notifyCancelled tells the server a call was given up, without holding
// up the caller.
func (d *downstream) notifyCancelled(cs *mcp.ClientSession, reqID, reason string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		params := `{"requestId":` + reqID + `,"reason":` + string(appendJSONString(nil, reason)) + `}`
		d.send(ctx, cs, appendRequest(nil, nil, "notifications/cancelled", []byte(params)))
	}()
}
