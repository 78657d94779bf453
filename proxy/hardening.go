package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The HTTP front's hardening (DESIGN §5): what every path of the sidecar's
// HTTP server gets before any handler runs, so that no path can forget it.
// (Bearer tokens are read and checked by package authn.)

// Timeouts of the sidecar's HTTP server. A connection that sends its
// request headers slower than ReadHeaderTimeout, its body slower than
// BodyTimeout, or nothing for IdleTimeout between requests is closed, so
// slow or idle connections cannot pile up (19,980 slow chunked requests
// with no body once exhausted the file descriptors). There is no write
// timeout: event streams and long tool calls legitimately stay open.
const (
	ReadHeaderTimeout = 10 * time.Second
	BodyTimeout       = 30 * time.Second
	IdleTimeout       = 30 * time.Second
)

// Session limits of the HTTP front, when [Options] leave them zero. An
// idle stateful session costs about 20 KB; without a cap, a client with a
// valid token could open them until memory ran out.
const (
	DefaultMaxSessions = 1024
	DefaultSessionIdle = 10 * time.Minute
)

// FrontOptions configure [Front].
type FrontOptions struct {
	// BodyTimeout bounds the reading of one request's body (default
	// [BodyTimeout]).
	BodyTimeout time.Duration
	// WriteTimeout bounds how long one write of an answer may make no
	// progress (default streamWriteTimeout, as for event streams).
	WriteTimeout time.Duration
}

// Front wraps the sidecar's whole HTTP handler (/mcp, /log/, /healthz,
// /metrics, ...):
//
//   - On a loopback bind (the connection's local address is loopback), a
//     request whose Host is not a loopback name, or whose Origin is present
//     and not a loopback origin, gets 403: a web page must not reach the
//     sidecar through DNS rebinding or a cross-site request.
//   - A request body must arrive within opts.BodyTimeout; a slower one
//     fails its read, and the connection is closed.
//   - A write deadline left on the connection by the answer to its last
//     request (writeTimed: a client that takes none of an answer for
//     streamWriteTimeout is given up) is cleared.
//   - Every answer is written under writeTimed, and what net/http writes
//     of it after the handler returns under opts.WriteTimeout too: a
//     client that sends requests (pipelined, say) and reads none of the
//     answers is given up, rather than holding its connection for ever.
//     No deadline runs while a handler works (a long tool call).
func Front(next http.Handler, opts FrontOptions) http.Handler {
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = BodyTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = streamWriteTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A write deadline an answer left on the connection (writeTimed)
		// is not this request's.
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Time{})
		defer func() { rc.SetWriteDeadline(time.Now().Add(opts.WriteTimeout)) }()
		w = &timedWriter{ResponseWriter: w, rc: rc, timeout: opts.WriteTimeout}
		if msg := checkLoopback(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(time.Now().Add(opts.BodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkLoopback returns why r may not be served on a loopback bind, or "".
func checkLoopback(r *http.Request) string {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) {
		return ""
	}
	if !isLoopback(r.Host) {
		return fmt.Sprintf("provlog: Host %q is not a loopback name; on a loopback address only localhost, 127.0.0.1 and [::1] are served (DNS rebinding protection)", r.Host)
	}
	for _, o := range r.Header.Values("Origin") {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !isLoopback(u.Host) {
			return fmt.Sprintf("provlog: Origin %q is not a loopback origin; on a loopback address cross-site requests are refused", o)
		}
	}
	return ""
}

// isLoopback reports whether hostport (a host with or without a port)
// names the loopback interface: localhost or a loopback IP.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// timedWriter writes an answer under writeTimed.
type timedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (t *timedWriter) Write(b []byte) (int, error) {
	if err := writeTimed(t.rc, t.ResponseWriter, b, t.timeout); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// deadlineBody clears the connection's read deadline once the body has
// been read, so that a long call or event stream on the same request is
// not cut off by it.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// sessionsFull reports whether r would open a stateful session (a POST
// without a session id, to the stateful handler) while the front already
// has Options.MaxSessions of them.
func (p *Proxy) sessionsFull(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	n := 0
	for ss := range p.server.Sessions() {
		if ss.ID() != "" { // stateless and stdio sessions have none
			n++
		}
	}
	return n >= p.opts.MaxSessions
}

// writeHTTPError answers a request with an HTTP status and a JSON-RPC
// error under id null (the request was not read).
func writeHTTPError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(appendResponse(nil, json.RawMessage("null"), nil, e))
}

// A postBody is a POST's body as the front read it (oneMessage).
type postBody struct {
	raw    []byte      // nil for a request without a body
	msg    fastRequest // raw read as one message by parseFast, if parsed
	parsed bool
}

// oneMessage reads a POST's body and lets it on (reporting true) only if
// it is one JSON value, a message or a batch, with nothing after it but
// white space: the SDK's decoder stops after the first value and ignored
// the rest ({"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1} was
// answered). Otherwise it answers 400 or 413 itself. One linear pass: the
// fast path's strict reading (parseFast), whose result the fast path
// uses, and encoding/json's scanner for what that does not take; r.Body
// is replaced by the bytes read, which it also returns.
func (p *Proxy) oneMessage(w http.ResponseWriter, r *http.Request) (postBody, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return postBody{}, true
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		r.Body.Close()
		writeHTTPError(w, http.StatusUnsupportedMediaType, rpcError(jsonrpc.CodeInvalidRequest, "provlog: Content-Encoding %q is not supported; send the JSON-RPC message uncompressed", truncate(ce, 64)))
		return postBody{}, false
	}
	body, err := readBody(r.Body, r.ContentLength, p.opts.MaxRequestBytes)
	r.Body.Close()
	pb := postBody{raw: body}
	switch {
	case err != nil:
		writeHTTPError(w, http.StatusBadRequest, rpcError(jsonrpc.CodeParseError, "provlog: reading the request body: %v", err))
		return postBody{}, false
	case int64(len(body)) > p.opts.MaxRequestBytes:
		writeHTTPError(w, http.StatusRequestEntityTooLarge, rpcError(jsonrpc.CodeInvalidRequest, "provlog: the request body exceeds %d bytes", p.opts.MaxRequestBytes))
		return postBody{}, false
	}
	// What parseFast reads (as strictly as JCS) is one valid JSON object.
	if pb.msg, pb.parsed = parseFast(body); !pb.parsed && !json.Valid(body) {
		// Why, in encoding/json's words (too deep, data after the value...).
		why := json.Unmarshal(body, new(json.RawMessage))
		writeHTTPError(w, http.StatusBadRequest, rpcError(jsonrpc.CodeParseError,
			"provlog: the request body is not one JSON value (%v); send one JSON-RPC message per POST", why))
		return postBody{}, false
	}
	if len(body) > maxInitializeBytes && initializeRequest(pb, body) {
		writeHTTPError(w, http.StatusRequestEntityTooLarge, rpcError(jsonrpc.CodeInvalidRequest,
			"provlog: the initialize request is over %d bytes; a session keeps its initialize params for its life, so send smaller capabilities and clientInfo", maxInitializeBytes))
		return postBody{}, false
	}
	if why := bodyBatchFault(pb, body); why != "" {
		writeHTTPError(w, http.StatusBadRequest, rpcError(jsonrpc.CodeInvalidRequest, "provlog: %s", why))
		return postBody{}, false
	}
	id, bad := pb.msg.id, unsafeID(pb.msg.id) // what parseFast read has its id at hand
	if !pb.parsed {
		id, bad = badRequestID(body) // anything else is scanned for one
	}
	if bad {
		writeHTTPError(w, http.StatusBadRequest, refusedIDMessage(id))
		return postBody{}, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return pb, true
}

// maxInitializeBytes bounds an initialize request's body. A stateful
// session keeps its client's initialize params (capabilities, clientInfo)
// for its life, decoded: 60 sessions opened with 4 MiB of capabilities
// each held 480 MiB, so one token could fill the sidecar's memory with its
// sessions.max of them. A client's capabilities and clientInfo (icons
// as data URIs included) fit well within this.
const maxInitializeBytes = 256 << 10

// initializeRequest reports whether the POST body read as pb is an
// initialize request (or a batch holding one, which the SDK refuses
// anyway).
func initializeRequest(pb postBody, body []byte) bool {
	if pb.parsed {
		return pb.msg.method == "initialize"
	}
	type message struct {
		Method string `json:"method"`
	}
	var one message
	if json.Unmarshal(body, &one) == nil {
		return one.Method == "initialize"
	}
	var batch []message
	return json.Unmarshal(body, &batch) == nil && slices.ContainsFunc(batch, func(m message) bool { return m.Method == "initialize" })
}

// bodyBatchFault is batchFault's reason to refuse the POST body read as
// pb, if it is a batch, or "". The SDK served a batch of 90,000 pings
// (under the body bound) at once, as it did on stdio.
func bodyBatchFault(pb postBody, body []byte) string {
	if pb.parsed {
		return "" // one message
	}
	var batch []json.RawMessage
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '[' || json.Unmarshal(b, &batch) != nil {
		return ""
	}
	return batchFault(len(batch))
}

// readBody reads r to its end, or to one byte past limit. A body that
// declared a length (within limit, up to 64 KiB: a declaration alone
// reserves no more) is read into a buffer of that size, in one allocation.
func readBody(r io.Reader, length, limit int64) ([]byte, error) {
	if length < 0 || length > min(limit, 64<<10) {
		return io.ReadAll(io.LimitReader(r, limit+1))
	}
	b := make([]byte, 0, length+1) // +1: the read that sees the end
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case errors.Is(err, io.EOF):
			return b, nil
		case err != nil:
			return b, err
		case int64(len(b)) > limit:
			return b, nil
		case len(b) == cap(b):
			b = append(b, 0)[:len(b)] // a body longer than it said: grow
		}
	}
}

// maxSafeID is the largest integer id the SDK keeps as sent (unsafeID).
const maxSafeID = 1 << 53

// badRequestID returns the id of msg, a JSON-RPC message or batch from a
// client, if it is a number the SDK would not keep as sent (unsafeID); of
// a batch, the first such id of its messages. MCP ids are strings or
// integers. Most messages are settled by a scan for "id" members with
// such numbers; only a message that has one (or an escape, which may
// spell "id") is decoded, to see whether it is a message's own id. Both
// fronts refuse such a message with it before anything reads it further.
func badRequestID(msg []byte) (json.RawMessage, bool) {
	escaped := bytes.Contains(msg, []byte(`\u`))
	for rest := msg; !escaped; {
		i := bytes.Index(rest, []byte(`"id"`))
		if i < 0 {
			return nil, false
		}
		rest = bytes.TrimLeft(rest[i+4:], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		n := 0
		for n < len(rest) && strings.IndexByte("+-.0123456789eE", rest[n]) >= 0 {
			n++
		}
		if n > 0 && !safeID(rest[:n]) {
			break
		}
	}
	type message struct {
		ID json.RawMessage `json:"id"`
	}
	// Decoded as the SDK decodes it: "Id" is no id.
	var batch []message
	if t := bytes.TrimLeft(msg, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if sdkDecode(msg, &batch) != nil {
			return nil, false // not a batch of objects: the SDK refuses it
		}
	} else {
		batch = make([]message, 1)
		if sdkDecode(msg, &batch[0]) != nil {
			return nil, false // not JSON: the SDK refuses it
		}
	}
	for _, m := range batch {
		if unsafeID(m.ID) {
			return m.ID, true
		}
	}
	return nil, false
}

// unsafeID reports whether id, a JSON value, is a number the SDK would not
// keep as sent (strings and absent ids are kept): it reads a numeric id
// as a float64 and then an int64, so 1.5 became 1, 1e3 1000, -0 0, and
// 9007199254740993 9007199254740992, and the client got its answer under
// an id it never sent.
func unsafeID(id json.RawMessage) bool {
	return len(id) > 0 && (id[0] == '-' || id[0] >= '0' && id[0] <= '9') && !safeID(id)
}

// safeID reports whether num, a JSON number, is an integer within ±2^53
// written as the SDK writes it back: digits only, and no -0.
func safeID(num []byte) bool {
	digits := bytes.TrimPrefix(num, []byte("-"))
	if len(digits) == 0 || len(digits) > 16 || len(digits) < len(num) && digits[0] == '0' {
		return false
	}
	v := uint64(0)
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
		v = v*10 + uint64(c-'0')
	}
	return v <= maxSafeID
}

// refusedIDMessage is the refusal of a request whose id is badRequestID's.
func refusedIDMessage(id json.RawMessage) *jsonrpc.Error {
	return rpcError(jsonrpc.CodeInvalidRequest, "provlog: the request id %s is not a string or an integer within ±2^53 (digits only, not -0); send a string or such an integer", truncate(string(id), 64))
}
