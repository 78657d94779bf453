package proxy

import (
	"bufio"
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

	"github.com/provlog/provlog/log"
)

// The fast path's downstream half: one tools/call to a streamable HTTP
// server, made as a plain POST on the session the SDK's client opened
// (same session id, protocol version and headers), its answer read as JSON
// or as an event stream. The result's bytes are the ones the call entry
// hashes, as received.

// wireMessage is a JSON-RPC message from a downstream server.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`

	resultCanon []byte // Result's canonical form, when it has one
	isError     bool   // Result's isError
}

// parseWire reads one JSON-RPC message from a server. A message that is
// I-JSON (what JCS accepts) is read in one pass that also yields its
// result's canonical form and isError; anything else encoding/json reads.
// The message does not keep data.
func parseWire(data []byte) (*wireMessage, error) {
	var m wireMessage
	err := log.WalkObject(data, func(k string, raw, canon []byte) error {
		switch k {
		case "id":
			m.ID = bytes.Clone(raw)
		case "method":
			if canon[0] != '"' {
				return errNotFast
			}
			return json.Unmarshal(canon, &m.Method)
		case "params":
			m.Params = bytes.Clone(raw)
		case "result":
			m.Result = bytes.Clone(raw)
			m.resultCanon = bytes.Clone(canon)
			if canon[0] == '{' {
				log.WalkObject(canon, func(k string, _, v []byte) error {
					if k == "isError" {
						m.isError = string(v) == "true"
					}
					return nil
				})
			}
		case "error":
			if string(canon) != "null" {
				m.Error = new(wireError)
				return json.Unmarshal(raw, m.Error)
			}
		}
		return nil
	})
	if err == nil {
		return &m, nil
	}
	m = wireMessage{}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if len(m.Result) > 0 {
		var r struct {
			IsError bool `json:"isError"`
		}
		json.Unmarshal(m.Result, &r)
		m.isError = r.IsError
	}
	return &m, nil
}

type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// streamEndWait bounds the wait for the end of a call's event stream once
// its answer has arrived.
const streamEndWait = 100 * time.Millisecond

// errSessionGone marks a downstream failure after which the SDK's session
// is no use: the proxy closes it, and the supervisor reconnects.
var errSessionGone = errors.New("connection lost")

// rawHTTPCall makes fc's call to its HTTP server, filling in c's outcome.
// It returns nil, a *jsonrpc.Error the server answered with, or an
// errLocal.
func (p *Proxy) rawHTTPCall(ctx context.Context, fs *frontSession, fc fastCall, c *call) error {
	d := fc.d
	cs, err := d.session()
	if err != nil {
		c.isError, c.errText = true, err.Error()
		return errLocal{c.errText}
	}
	reqID := strconv.Quote("provlog-" + strconv.FormatUint(p.nextToken.Add(1), 10))
	var body bytes.Buffer
	body.Grow(len(fc.args) + len(fc.meta) + 128)
	body.WriteString(`{"jsonrpc":"2.0","id":`)
	body.WriteString(reqID)
	body.WriteString(`,"method":"tools/call","params":{"name":`)
	name, _ := json.Marshal(fc.tool)
	body.Write(name)
	if len(fc.args) > 0 {
		body.WriteString(`,"arguments":`)
		body.Write(fc.args)
	}
	if len(fc.meta) > 0 {
		body.WriteString(`,"_meta":`)
		body.Write(fc.meta)
	}
	body.WriteString(`}}`)

	cctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	msg, err := d.post(cctx, cs, body.Bytes(), reqID, fs)
	switch {
	case err == nil && msg.Error != nil:
		c.isError, c.errText, c.errCode = true, scrub(msg.Error.Message, c.secrets), msg.Error.Code
		return &jsonrpc.Error{Code: msg.Error.Code, Message: msg.Error.Message, Data: msg.Error.Data}
	case err == nil:
		c.result, c.resultCanon, c.isError = msg.Result, msg.resultCanon, msg.isError
		return nil
	case ctx.Err() != nil:
		c.isError, c.errText = true, "cancelled by the client"
		d.notifyCancelled(cs, reqID)
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		c.isError, c.errText = true, fmt.Sprintf("server %q did not answer %s within %s", d.cfg.ID, fc.tool, d.cfg.timeout())
		d.notifyCancelled(cs, reqID)
	default:
		c.isError, c.errText = true, fmt.Sprintf("server %q: %v", d.cfg.ID, err)
		if errors.Is(err, errSessionGone) {
			c.errText += "; reconnecting"
			p.logger.Warn("proxy: downstream session lost; reconnecting", "server", d.cfg.ID, "error", err)
			cs.Close()
			if d.h1 != nil {
				d.h1.closeIdle()
			}
		}
	}
	c.errText = scrub(c.errText, c.secrets)
	return errLocal{c.errText}
}

// newRequest returns a POST of body on cs's session.
func (d *downstream) newRequest(ctx context.Context, cs *mcp.ClientSession, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	for k, v := range d.cfg.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", acceptBoth)
	if id := cs.ID(); id != "" {
		h.Set("Mcp-Session-Id", id)
	}
	if r := cs.InitializeResult(); r != nil && r.ProtocolVersion != "" {
		h.Set("Mcp-Protocol-Version", r.ProtocolVersion)
	}
	return req, nil
}

// acceptBoth is the Accept header of every POST: streamable HTTP servers
// may answer with JSON or an event stream.
const acceptBoth = "application/json, text/event-stream"

// fixedHeaders are set by the proxy on every POST, whatever the config says.
var fixedHeaders = map[string]bool{
	"Content-Type": true, "Accept": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true,
	"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Host": true,
}

// renderHeader writes a server's configured headers, and the fixed ones
// that do not depend on the session, as HTTP/1.1 header lines.
func renderHeader(headers map[string]string) ([]byte, error) {
	var b []byte
	for k, v := range headers {
		if !validHeaderName(k) || !validHeaderValue(v) {
			return nil, fmt.Errorf("header %q: invalid name or value", k)
		}
		if fixedHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		b = append(b, k...)
		b = append(b, ": "...)
		b = append(b, v...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Type: application/json\r\nAccept: "+acceptBoth+"\r\n"...)
	return b, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
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
	if d.h1 != nil {
		h := make([]byte, 0, len(d.h1Header)+128)
		h = append(h, d.h1Header...)
		ok := true
		if id := cs.ID(); id != "" {
			ok = validHeaderValue(id)
			h = append(append(append(h, "Mcp-Session-Id: "...), id...), "\r\n"...)
		}
		if r := cs.InitializeResult(); r != nil && r.ProtocolVersion != "" {
			ok = ok && validHeaderValue(r.ProtocolVersion)
			h = append(append(append(h, "Mcp-Protocol-Version: "...), r.ProtocolVersion...), "\r\n"...)
		}
		if ok {
			return d.h1.post(ctx, h, body)
		}
	}
	req, err := d.newRequest(ctx, cs, body)
	if err != nil {
		return nil, err
	}
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
func (d *downstream) post(ctx context.Context, cs *mcp.ClientSession, body []byte, reqID string, fs *frontSession) (*wireMessage, error) {
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
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(snippet))
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		msg, err := parseWire(b)
		if err != nil {
			return nil, fmt.Errorf("the answer is not a JSON-RPC message: %v", err)
		}
		if string(msg.ID) != reqID {
			return nil, fmt.Errorf("the answer is for request %s, not %s", msg.ID, reqID)
		}
		return msg, nil
	case "text/event-stream":
		var answer *wireMessage
		err := readEvents(resp.Body, func(data []byte) bool {
			msg, err := parseWire(data)
			if err != nil {
				return true // not a message: skip it, as the SDK does
			}
			if msg.Method == "" {
				if string(msg.ID) == reqID {
					answer = msg
					return false
				}
				return true
			}
			d.onStream(ctx, cs, fs, msg)
			return true
		})
		if answer != nil {
			// The server ends the stream after its answer; read that end,
			// so the connection goes back to the pool rather than being
			// closed (a body closed early cannot be reused). A server
			// that keeps the stream open loses the connection instead.
			t := time.AfterFunc(streamEndWait, cancel)
			io.Copy(io.Discard, resp.Body)
			t.Stop()
			return answer, nil
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("the event stream ended without an answer: %w", err)
	default:
		return nil, fmt.Errorf("unexpected answer of type %q", resp.Header.Get("Content-Type"))
	}
}

// eventReaders are readEvents' buffers (longer lines are put together).
var eventReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// readEvents calls fn with the data of each server-sent event in r until
// fn returns false or r ends.
func readEvents(r io.Reader, fn func(data []byte) bool) error {
	br := eventReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		eventReaders.Put(br)
	}()
	var data []byte
	has := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && len(line) == 0 {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if has && !fn(data) {
				return nil
			}
			data, has = data[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) == "data" {
			value = bytes.TrimPrefix(value, []byte(" "))
			if has {
				data = append(data, '\n')
			}
			data = append(data, value...)
			has = true
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if has {
					fn(data)
				}
				return nil
			}
			return err
		}
	}
}

// onStream serves a request or notification the server sent on a call's
// stream: it belongs to that call, so it goes to the calling session.
func (d *downstream) onStream(ctx context.Context, cs *mcp.ClientSession, fs *frontSession, msg *wireMessage) {
	if msg.ID == nil {
		switch msg.Method {
		case "notifications/message":
			var params mcp.LoggingMessageParams
			if json.Unmarshal(msg.Params, &params) == nil {
				d.logPrefix(&params)
				_ = fs.ss.Log(ctx, &params)
			}
		case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
			d.cat.triggerResync()
		case "notifications/resources/updated":
			var params mcp.ResourceUpdatedNotificationParams
			if json.Unmarshal(msg.Params, &params) == nil {
				d.resourceUpdated(ctx, &mcp.ResourceUpdatedNotificationRequest{Params: &params})
			}
		}
		// Progress needs a token, which fast calls do not give.
		return
	}
	result, rerr := d.serveRequest(ctx, fs, msg)
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(msg.ID)
	if rerr != nil {
		e, _ := json.Marshal(wireError{Code: rerr.Code, Message: rerr.Message, Data: rerr.Data})
		b.WriteString(`,"error":`)
		b.Write(e)
	} else {
		r, err := json.Marshal(result)
		if err != nil {
			r, _ = json.Marshal(wireError{Code: jsonrpc.CodeInternalError, Message: err.Error()})
			b.WriteString(`,"error":`)
		} else {
			b.WriteString(`,"result":`)
		}
		b.Write(r)
	}
	b.WriteByte('}')
	if err := d.send(ctx, cs, b.Bytes()); err != nil {
		d.p.logger.Warn("proxy: answering a server's request failed", "server", d.cfg.ID, "method", msg.Method, "error", err)
	}
}

// serveRequest answers a server-to-client request made during a call by
// asking the calling session's client.
func (d *downstream) serveRequest(ctx context.Context, fs *frontSession, msg *wireMessage) (any, *jsonrpc.Error) {
	switch msg.Method {
	case "ping":
		return struct{}{}, nil
	case "sampling/createMessage":
		var params mcp.CreateMessageParams
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: %v", err)
		}
		res, err := fs.ss.CreateMessage(ctx, &params)
		if err != nil {
			return nil, asRPCError(forwardError("client", err))
		}
		return res, nil
	case "elicitation/create":
		var params mcp.ElicitParams
		if err := json.Unmarshal(msg.Params, &params); err != nil {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "provlog: %v", err)
		}
		res, err := fs.ss.Elicit(ctx, &params)
		if err != nil {
			return nil, asRPCError(forwardError("client", err))
		}
		return res, nil
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

// notifyCancelled tells the server a call of the fast path was given up,
// without holding up the caller.
func (d *downstream) notifyCancelled(cs *mcp.ClientSession, reqID string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		body := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + reqID + `,"reason":"cancelled by the client"}}`)
		d.send(ctx, cs, body)
	}()
}
