package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
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
func Front(next http.Handler, opts FrontOptions) http.Handler {
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = BodyTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkLoopback(r); msg != "" {
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
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
// error without an id (the request was not read).
func writeHTTPError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// oneMessage reads a POST's body and lets it on (reporting true) only if
// it is one JSON value, a message or a batch, with nothing after it but
// white space: the SDK's decoder stops after the first value and ignored
// the rest ({"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1} was
// answered). Otherwise it answers 400 or 413 itself. One linear pass
// (encoding/json's scanner); r.Body is replaced by the bytes read, which
// it also returns (nil for a request without a body).
func (p *Proxy) oneMessage(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.opts.MaxRequestBytes+1))
	r.Body.Close()
	switch {
	case err != nil:
		writeHTTPError(w, http.StatusBadRequest, rpcError(jsonrpc.CodeParseError, "provlog: reading the request body: %v", err))
		return nil, false
	case int64(len(body)) > p.opts.MaxRequestBytes:
		writeHTTPError(w, http.StatusRequestEntityTooLarge, rpcError(jsonrpc.CodeInvalidRequest, "provlog: the request body exceeds %d bytes", p.opts.MaxRequestBytes))
		return nil, false
	case !json.Valid(body):
		writeHTTPError(w, http.StatusBadRequest, rpcError(jsonrpc.CodeParseError,
			"provlog: the request body is not one JSON value (malformed, or data after the message); send one JSON-RPC message per POST"))
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, true
}
