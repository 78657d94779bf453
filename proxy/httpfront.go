package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// The HTTP front's fast path.
//
// Through the SDK's server, one tools/call costs a JSON-RPC round on the
// server session: the message is decoded into Go types (the SDK's decoder
// allocates a 32 KiB buffer per message, several times per message), the
// result decoded and encoded again, and the call hops between goroutines.
// On two cores that made the proxy cost more CPU per call than the
// downstream server itself (tools/bench/README.md).
//
// So a plain tools/call on an initialized stateful session — one JSON-RPC
// request in the POST, no progress token, a tool of a stateful server —
// is read here, goes through the same call lifecycle as every other
// (serveCall), and is answered on a resumable event stream (2025-11-25),
// or with one application/json response (older revisions; an event
// stream if the server asks the client something), see callstream.go.
// A plain tools/call of the sessionless 2026-07-28 revision is served so
// too, with one JSON response (fastStateless). Everything else
// (initialize, lists, resources, prompts, the proxy's own and the task
// tools, calls with a progress token, batches, anything malformed) goes
// to the SDK's handler untouched, which also answers every error of
// protocol this path does not want to reproduce.
//
// What the SDK would have checked is checked here too: the session exists,
// was initialized and was not closed, it belongs to the request's actor, the
// Mcp-Protocol-Version header is one the session can speak, the Accept
// header names both JSON and event streams. What it does for a session is
// done here too: the session's idle clock is kept (the proxy keeps it for
// both paths, see frontSession), a notifications/cancelled for a call in
// flight here cancels it, and a client's response to a request on a fast
// call's stream reaches the call.

// fastProtocols are the session revisions the fast path serves.
var fastProtocols = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// A frontSession is an initialized stateful HTTP session of the front
// server.
type frontSession struct {
	ss       *mcp.ServerSession
	actor    string // the token's actor at initialization; only it may use the session
	client   *mcp.Implementation
	protocol string

	lastUsed atomic.Int64                // unix nanoseconds of the last request's start or POST's end
	use      atomic.Uint64               // POSTs in progress and admitted, and whether closed: see admit
	ids      frontIDs                    // the ids of its requests in progress, either path's
	asks     sync.Map                    // id of a request on a fast call's stream -> chan *wireMessage (callstream.go)
	streams  sync.Map                    // id of a resumable call stream -> *callStream (callstream.go)
	cred     atomic.Pointer[sessionCred] // the OAuth token last sent on it (sessiontoken.go)

	ctx    context.Context // done when the session ends: its calls are cancelled
	cancel context.CancelFunc
}

func (fs *frontSession) touch() { fs.lastUsed.Store(time.Now().UnixNano()) }

// sessionInitialized notes an initialized HTTP session for the fast path.
func (p *Proxy) sessionInitialized(_ context.Context, req *mcp.InitializedRequest) {
	ss := req.Session
	id := ss.ID()
	ip := ss.InitializeParams()
	if id == "" || ip == nil {
		return // not a stateful HTTP session
	}
	// The notification carries no token; the initialize request did.
	actor, ok := p.initActors.LoadAndDelete(ss)
	if !ok {
		return
	}
	fs := &frontSession{ss: ss, actor: actor.(string), client: ip.ClientInfo, protocol: ip.ProtocolVersion}
	fs.ctx, fs.cancel = context.WithCancel(context.Background())
	fs.touch()
	p.sessions.Store(id, fs)
	go func() {
		ss.Wait()
		if hold := p.testingOnlyBeforeForget; hold != nil {
			hold()
		}
		fs.markClosed() // a DELETE or the reaper did already; the SDK's own ending did not
		p.sessions.Delete(id)
		fs.cancel()
		p.closeStreams(fs)
	}()
}

// noteActor remembers the actor of an HTTP session's initialize
// request, for sessionInitialized, and that of a sessionless 2026-07-28
// request's session (the SDK's, for that request alone, which no
// initialize gave one), for sessionActor.
func (p *Proxy) noteActor(method string, req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	ex := req.GetExtra()
	switch {
	case ex == nil || ex.TokenInfo == nil || ex.TokenInfo.UserID == "":
		return // not over HTTP: a stdio client's session, whose actor is the config's
	case ss.ID() != "" && method != "initialize":
		return // a stateful session's actor is its initialize request's
	case ss.ID() != "":
		p.countSession(ss, ex.TokenInfo.UserID, ex.TokenInfo)
	}
	if _, noted := p.initActors.LoadOrStore(ss, ex.TokenInfo.UserID); !noted {
		go func() {
			ss.Wait()
			p.initActors.Delete(ss)
		}()
	}
}

// serveStateful serves a request of a stateful HTTP session: on the fast
// path if it can, else through the SDK's handler.
func (p *Proxy) serveStateful(w http.ResponseWriter, r *http.Request, pb postBody, sdk http.Handler) {
	var fs *frontSession
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if v, ok := p.sessions.Load(id); ok {
			fs = v.(*frontSession)
			if !fs.actorOf(r) {
				// Refused as the SDK refuses it, before anything of the
				// session is touched: another actor's request neither
				// keeps it alive nor holds its request ids (whose refusal
				// as duplicates would tell which are in flight).
				http.Error(w, "session user mismatch", http.StatusForbidden)
				return
			}
			fs.touch()
		}
	}
	if fs != nil {
		switch {
		case r.Method == http.MethodPost:
			if !fs.admit() {
				writeSessionNotFound(w)
				return
			}
			defer fs.release()
			if !p.noFastPath && pb.parsed && p.fastPOST(w, r, fs, pb.msg) {
				return
			}
			held, ok := p.holdIDs(w, r, fs, pb)
			if !ok {
				return
			}
			defer fs.releaseIDs(held)
		case fs.closed():
			writeSessionNotFound(w)
			return
		case r.Method == http.MethodGet && !p.noFastPath:
			if last := r.Header.Get("Last-Event-ID"); last != "" && p.resume(w, r, fs, last) {
				return
			}
		case r.Method == http.MethodDelete:
			// The SDK closes the session for its own actor's DELETE (it
			// knows the session: the proxy forgets one only after the
			// SDK did). No POST is admitted from here on, though the
			// proxy forgets the session only once the SDK's has ended.
			fs.markClosed()
		}
	}
	p.serveSDK(sdk, w, r)
}

// serveSDK serves r with the SDK's handler h, which writes to w through a
// streamWriter: no goroutine that has a message for the client waits for
// it.
func (p *Proxy) serveSDK(h http.Handler, w http.ResponseWriter, r *http.Request) {
	sw := newStreamWriter(w, p.logger)
	sw.timeout = p.answerTimeout()
	defer sw.close()
	h.ServeHTTP(sw, r)
}

// fastRequest is a JSON-RPC message as the fast path reads it: a
// request, a notification, or a response (no method; result or error).
type fastRequest struct {
	id     json.RawMessage
	method string
	params []byte // an object, as received
	result []byte
	err    *jsonrpc.Error

	// Members of params, read in the same pass (fastParams): what a
	// tools/call or a notifications/cancelled needs.
	name      string // "name", if a string
	args      []byte // "arguments", as received
	argsCanon []byte // their canonical form, if an object
	meta      []byte // "_meta", as received
	requestID []byte // "requestId", as received
	other     bool   // a member besides those, or a name that is not a string
}

// errNotFast ends a walk over a message the fast path leaves to the SDK.
var errNotFast = errors.New("not for the fast path")

// parseFast reads body as one JSON-RPC request or notification whose
// members are exactly the protocol's, or reports false. It reads JSON as
// strictly as JCS does (log.WalkObjectIn): what it refuses, the SDK
// serves. The members of params are read in the same pass.
func parseFast(body []byte) (fastRequest, bool) {
	var fr fastRequest
	version := false
	err := log.WalkObjectIn(body, func(k string, raw, canon []byte) error {
		switch k {
		case "jsonrpc":
			if string(canon) != `"2.0"` {
				return errNotFast
			}
			version = true
		case "id":
			if !(raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
				return errNotFast
			}
			fr.id = raw
		case "method":
			var ok bool
			if fr.method, ok = canonString(canon); !ok {
				return errNotFast
			}
		case "params":
			if raw[0] != '{' {
				return errNotFast
			}
			fr.params = raw
		case "result":
			fr.result = raw
		case "error":
			fr.err = new(jsonrpc.Error)
			if raw[0] != '{' || json.Unmarshal(raw, fr.err) != nil {
				return errNotFast
			}
		default:
			return errNotFast
		}
		return nil
	}, func(k string) func(k string, raw, canon []byte) error {
		if k == "params" {
			return fr.fastParam
		}
		return nil
	})
	response := fr.result != nil || fr.err != nil
	switch {
	case err != nil || !version:
		return fastRequest{}, false
	case response && (fr.method != "" || fr.params != nil || fr.id == nil || fr.result != nil && fr.err != nil):
		return fastRequest{}, false
	case !response && fr.method == "":
		return fastRequest{}, false
	}
	return fr, true
}

// fastParam notes one member of the params of fr.
func (fr *fastRequest) fastParam(k string, raw, canon []byte) error {
	switch k {
	case "name":
		var ok bool
		if fr.name, ok = canonString(canon); !ok {
			fr.other = true
		}
	case "arguments":
		fr.args = raw
		if raw[0] == '{' {
			// canon is the walk's, good only now: arguments sent
			// canonical (often) are their own canonical form.
			fr.argsCanon = raw[:len(raw):len(raw)]
			if !bytes.Equal(raw, canon) {
				fr.argsCanon = bytes.Clone(canon)
			}
		}
	case "_meta":
		fr.meta = raw
	case "requestId":
		fr.requestID = raw
	default:
		fr.other = true
	}
	return nil
}

// fastPOST serves r, whose body is fr, on the fast path and reports true,
// or reports false having left r as it found it. r is of fs's actor
// (serveStateful).
func (p *Proxy) fastPOST(w http.ResponseWriter, r *http.Request, fs *frontSession, fr fastRequest) bool {
	if !jsonBody(r.Header) {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !slices.Contains(fastProtocols, v) {
		return false
	}
	switch {
	case fr.method == "":
		// A client's response to a request on a fast call's stream.
		if !fs.deliver(fr.id, &wireMessage{ID: fr.id, Result: bytes.Clone(fr.result), Error: fr.err}) {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case fr.method == "notifications/cancelled" && fr.id == nil:
		if !fs.ids.cancel(callKey(fr.requestID)) {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case fr.method == "tools/call" && fr.id != nil:
		jsonOK, streamOK := accepts(r.Header.Values("Accept"))
		if !jsonOK || !streamOK {
			return false
		}
		fc, ok := p.fastCallOf(fr, false)
		if !ok {
			return false
		}
		p.serveFastCall(w, r, fs, fr.id, fc, auth.TokenInfoFromContext(r.Context()))
		return true
	}
	return false
}

// jsonBody reports whether a request's Content-Type is JSON, as the SDK's
// handler judges it: its media type is application/json
// (application/jsonx or application/json-seq is not, and the SDK refuses
// them, 415).
func jsonBody(h http.Header) bool {
	ct := h.Get("Content-Type")
	if ct == "application/json" {
		return true // the usual case, without parsing
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// accepts reports whether an Accept header takes JSON and event streams.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// A fastCall is a tools/call the fast path takes.
type fastCall struct {
	d         *downstream
	front     string // the tool's front name
	tool      string // its name on the server
	args      json.RawMessage
	meta      mcp.Meta
	argsCanon []byte // args' canonical form (nil for null arguments)
}

// fastCallOf returns the call fr makes, if the fast path takes it: a tool
// of a downstream server (of a server with sessions, unless the call is
// sessionless itself: a 2026-07-28 client's), params with only name,
// arguments (an object or null) and _meta (without a progress token,
// whose notifications need the SDK's streams).
func (p *Proxy) fastCallOf(fr fastRequest, sessionless bool) (fastCall, bool) {
	if fr.params == nil || fr.other || fr.requestID != nil || fr.args != nil && fr.argsCanon == nil && string(fr.args) != "null" {
		return fastCall{}, false
	}
	fc := fastCall{front: fr.name, args: fr.args, argsCanon: fr.argsCanon}
	if fr.meta != nil {
		if json.Unmarshal(fr.meta, &fc.meta) != nil || fc.meta == nil {
			return fastCall{}, false
		}
		if _, ok := fc.meta["progressToken"]; ok {
			return fastCall{}, false
		}
	}
	d, tool := p.router.tool(fc.front)
	if d == nil || d.stateless() && !sessionless {
		return fastCall{}, false
	}
	fc.d, fc.tool = d, tool
	return fc, true
}

// serveFastCall serves one tools/call through the call lifecycle
// (serveCall) and answers it (callstream.go). A call whose stream can be
// resumed is detached from the POST: it ends with its answer, a
// notifications/cancelled or the session, not with the connection. It
// still runs on the handler's goroutine (a goroutine of its own cost a
// new stack grown to the call's depth, and two wake-ups, every call): a
// connection that drops is let go at once, so that a resume can take the
// stream over, and the handler returns when the call ends.
//
// The call's id is claimed before its stream exists: a call under an id
// in progress is refused as the SDK refuses it (refuseDuplicate), before
// anything of a stream is written, neither recorded nor made.
func (p *Proxy) serveFastCall(w http.ResponseWriter, r *http.Request, fs *frontSession, id json.RawMessage, fc fastCall, ti *auth.TokenInfo) {
	p.fastCalls.Add(1)
	start := time.Now()
	ctx := r.Context()
	resumable := fs.resumable()
	if resumable {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := callKey(id)
	if !fs.ids.claim(key, cancel) {
		// The first call's cancellation would reach this one, and this
		// one's end would make the first uncancellable.
		p.refuseDuplicate(w, id)
		return
	}
	cst := p.newCallStream(fs, w)
	if resumable {
		release := cst.release
		dropped := context.AfterFunc(r.Context(), func() {
			cst.mu.Lock()
			if cst.release == release {
				cst.letGo()
			}
			cst.mu.Unlock()
		})
		defer dropped()
		defer context.AfterFunc(fs.ctx, cancel)()
	}
	p.runFastCall(ctx, key, cst, fs, r.Header, id, fc, ti, start)
}

// runFastCall makes a fast-path call, whose id fs holds under key, and
// answers it on its stream.
func (p *Proxy) runFastCall(ctx context.Context, key string, cst *callStream, fs *frontSession, header http.Header, id json.RawMessage, fc fastCall, ti *auth.TokenInfo, start time.Time) {
	in := &callIn{
		d: fc.d, tool: fc.tool, argsCanon: fc.argsCanon,
		params:  &mcp.CallToolParamsRaw{Name: fc.front, Arguments: fc.args, Meta: fc.meta},
		session: fs.ss, extra: &mcp.RequestExtra{TokenInfo: ti, Header: header},
		client: fs.client, protocol: fs.protocol, id: id, transport: "tcp", start: start,
	}
	// A cancelled call still gets an answer: the POST needs one.
	res, rerr := p.serveGuarded(context.WithValue(ctx, callStreamKey{}, cst), in)
	// The id is free again before its answer goes out: the client may
	// use it again as soon as it has the answer.
	fs.ids.free(key)
	p.answer(cst, id, res, rerr)
	if h := p.testingOnlyAnswered; h != nil {
		h()
	}
}

// fastStateless serves r, a request of the sessionless 2026-07-28
// revision, on the fast path if it is a plain tools/call, and reports
// whether it did. Such a request carries what a session would hold (the
// revision, clientInfo and clientCapabilities in its _meta) and names its
// method and tool in headers too; the SDK's stateless handler checks all
// of it and builds a session for the one request, which cost a 1 KiB
// echo some 1.3 ms and twice the CPU of a 2025-11-25 call. It is taken
// here only when every check passes as written (the headers and the
// _meta agree, the tool binds no argument to a header) and the client
// asks for no log messages (which only an event stream carries), goes through the
// one lifecycle and is answered with one JSON response; anything else
// goes to the SDK's handler, which also answers every error.
func (p *Proxy) fastStateless(w http.ResponseWriter, r *http.Request, pb postBody) bool {
	fr, h := pb.msg, r.Header
	if p.noFastPath || !pb.parsed || r.Method != http.MethodPost || fr.method != "tools/call" || fr.id == nil || fr.name == "" ||
		h.Get("Mcp-Protocol-Version") != statelessProtocol || h.Get("Mcp-Session-Id") != "" ||
		h.Get("Mcp-Method") != fr.method || h.Get("Mcp-Name") != fr.name {
		return false
	}
	if !jsonBody(h) {
		return false
	}
	if jsonOK, streamOK := accepts(h.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		return false
	}
	fc, ok := p.fastCallOf(fr, true)
	if !ok || fc.d.cat.paramHeaders(fc.front) {
		return false
	}
	client, ok := sessionlessClient(fc.meta)
	if _, logs := fc.meta[mcp.MetaKeyLogLevel]; !ok || logs {
		return false // a client that asks for log messages gets them on the SDK's event stream
	}
	p.statelessCalls.Add(1)
	in := &callIn{
		d: fc.d, tool: fc.tool, argsCanon: fc.argsCanon,
		params: &mcp.CallToolParamsRaw{Name: fc.front, Arguments: fc.args, Meta: fc.meta},
		extra:  &mcp.RequestExtra{TokenInfo: ti, Header: h}, client: client, protocol: statelessProtocol,
		id: fr.id, transport: "tcp", start: time.Now(),
	}
	res, rerr := p.serveGuarded(r.Context(), in)
	if rerr == nil {
		res = withResultType(res)
	}
	if err := writeRPCStatus(w, sessionlessStatus(rerr), fr.id, res, rerr, p.answerTimeout()); errors.Is(err, os.ErrDeadlineExceeded) {
		p.logger.Warn("proxy: an HTTP client took nothing of its call's answer; its connection is closed", "waited", p.answerTimeout())
	}
	return true
}

// sessionlessStatus is the HTTP status of a 2026-07-28 answer (SEP-2575):
// 404 for an unknown method, 400 for invalid params, an unsupported
// revision or a capability the client lacks, else 200.
func sessionlessStatus(rerr *jsonrpc.Error) int {
	switch {
	case rerr == nil:
		return http.StatusOK
	case rerr.Code == jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case rerr.Code == jsonrpc.CodeInvalidParams, rerr.Code == mcp.CodeUnsupportedProtocolVersion, rerr.Code == mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// sessionlessClient returns the clientInfo of a 2026-07-28 request's
// _meta (nil if it has none), if that _meta holds the revision and the
// client's capabilities as the SDK requires, and a clientInfo only as
// the SDK reads it.
func sessionlessClient(meta mcp.Meta) (*mcp.Implementation, bool) {
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != statelessProtocol {
		return nil, false
	}
	if _, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any); !ok {
		return nil, false
	}
	ci, present := meta[mcp.MetaKeyClientInfo]
	if !present {
		return nil, true
	}
	b, err := json.Marshal(ci)
	impl := new(mcp.Implementation)
	if _, isObject := ci.(map[string]any); err != nil || !isObject || json.Unmarshal(b, impl) != nil {
		return nil, false
	}
	return impl, true
}

// serveGuarded is serveCall with a panic turned into the client's error,
// for the fronts that serve calls themselves (the HTTP front's fast path
// and the pipe front).
func (p *Proxy) serveGuarded(ctx context.Context, in *callIn) (res json.RawMessage, rerr *jsonrpc.Error) {
	defer func() {
		if v := recover(); v != nil {
			// The tool's name and the panic's text may hold what a
			// server or client sent, redacted values included.
			tool, text := in.params.Name, fmt.Sprint(v)
			if in.d != nil {
				tool, text = in.d.secrets.scrubName(tool), in.d.logText(text, in.secrets)
			}
			p.logger.Error("proxy: panic while serving a call", "tool", tool, "panic", text, "stack", string(debug.Stack()))
			res, rerr = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: internal error while handling tools/call"}
		}
	}()
	return p.serveCall(ctx, in)
}

// writeRPCStatus answers a POST with one JSON-RPC response under HTTP
// status, giving the client up if it takes none of it for timeout
// (writeTimed).
func writeRPCStatus(w http.ResponseWriter, status int, id, result json.RawMessage, rpcErr *jsonrpc.Error, timeout time.Duration) error {
	b := appendResponse(make([]byte, 0, len(result)+64), id, result, rpcErr)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	return writeTimed(http.NewResponseController(w), w, b, timeout)
}

// answerTimeout is how long a client may take none of an answer on the
// fast path before it is given up: streamWriteTimeout, as on the SDK's.
func (p *Proxy) answerTimeout() time.Duration {
	if p.writeTimeout > 0 {
		return p.writeTimeout
	}
	return streamWriteTimeout
}

// growStack grows the calling goroutine's stack, while it is still shallow,
// to what a call needs (a call's goroutine is new): growing it in one copy
// of a few frames, where the call itself would double it several times,
// each copy adjusting every frame of the call's deep stack.
//
//go:noinline
func growStack(i int) byte {
	var b [growStackBytes]byte
	b[i] = 1 // indexed at run time: the array stays in the frame
	return b[len(b)-1-i]
}

const growStackBytes = 8 << 10
