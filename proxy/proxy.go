package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn"
)

// ReceiptKey is the _meta key under which a recorded call's result (or the
// data of its error) carries the receipt of its call entry.
const ReceiptKey = "dev.provlog/receipt"

// downstreamProtocolVersion is what the proxy asks its downstream servers
// for. Pinning it skips the SDK's server/discover probe, which would put an
// unknown method on every legacy server's wire (research/mcp.md §1.5.1).
const downstreamProtocolVersion = "2025-11-25"

// statelessProtocol is the first protocol revision without sessions
// (SEP-2575); the SDK serves it only from a stateless HTTP handler.
const statelessProtocol = "2026-07-28"

// DefaultMaxRequestBytes bounds an HTTP request body when
// Options.MaxRequestBytes is zero.
const DefaultMaxRequestBytes = 4 << 20

// A Recorder appends one entry to the log and returns its receipt once the
// entry is durable. *server.Sequencer implements it.
type Recorder interface {
	Append(ctx context.Context, entry []byte) (*log.Receipt, error)
}

// expecter is a Recorder that can be told a call's entry is on its way,
// so that under load a commit waits briefly to carry it along with
// others (see server.Sequencer.Expect).
type expecter interface {
	Expect() pending
}

// pending is an announced append: appended, or cancelled. It is the very
// type log/server's Pending names (both alias one interface literal), so
// *server.Sequencer is an expecter without the proxy importing it.
type pending = interface {
	Append(ctx context.Context, entry []byte) (*log.Receipt, error)
	Cancel()
}

// A BlobStore keeps blobs named by the hex SHA-256 of their bytes:
// retained results, and arguments too large for an entry. *blobs.Store
// implements it.
type BlobStore interface {
	// Put stores data and returns its name.
	Put(data []byte) (sum string, err error)
	// Get returns the blob named sum, checked against its name.
	Get(sum string) ([]byte, error)
	// Purge deletes the blob named sum.
	Purge(sum string) error
}

// Options configure a [Proxy].
type Options struct {
	// Servers are the downstream MCP servers.
	Servers []ServerConfig
	// ReservedTools are the names of tools the program adds to the front
	// server itself (the task tools, record_replay): no downstream tool
	// may take them, as none may take the proxy's own.
	ReservedTools []string
	// Log records every tools/call to a downstream server. Required.
	Log Recorder
	// Blobs keeps retained results (retain: full) and arguments too large
	// for an entry. If nil, such arguments are kept as their hash only, and
	// retain: full is refused.
	Blobs BlobStore
	// BlobNamed says whether blob sum, which the entry at index entry
	// names, is named still: no purge entry after that entry names it.
	// On a store other sidecars share, a blob an entry names that is found
	// gone once the entry is in is stored again only if so: a purge
	// through another sidecar that deleted it after the entry was in
	// stands. If nil, or if it fails, the blob is stored again (a purge
	// left unfinished is one audit names and a rerun ends; a payload lost
	// is lost).
	BlobNamed func(ctx context.Context, sum string, entry uint64) (bool, error)
	// Actor names who is calling. If nil, the actor is the one the bearer
	// token was mapped to by HTTPHandler's authorize (the request's
	// TokenInfo.UserID), and a request without one is refused.
	Actor func(ctx context.Context, req *mcp.CallToolRequest) (string, error)
	// Status adds the log's state (size, last checkpoint, anchoring,
	// witnesses...) to provlog__status's answer, under "log".
	Status func(ctx context.Context) map[string]any
	// Prove returns the receipt of the entry at index (if index >= 0) or
	// with leafHash, for provlog__prove. If nil, that tool is absent.
	Prove func(ctx context.Context, index int64, leafHash []byte) (*log.Receipt, error)
	// Verifier checks receipts for provlog__verify. If nil, that tool is
	// absent.
	Verifier note.Verifier
	// Logger receives the proxy's own log lines (default: discarded). Tool
	// arguments never reach it.
	Logger *slog.Logger
	// Tracer, if set, makes a span of every recorded request: tools/calls
	// to downstream servers and to the sidecar's own recording tools,
	// resources/read, prompts/get (trace.go); nil: no spans, at no cost.
	Tracer trace.Tracer

	// Version is provlog's version, sent as serverInfo upstream and as
	// clientInfo downstream (default "devel").
	Version string
	// MaxRequestBytes bounds an HTTP request body (default
	// DefaultMaxRequestBytes); larger requests get 413.
	MaxRequestBytes int64
	// MaxSessions caps the HTTP front's stateful sessions (default
	// DefaultMaxSessions); an initialize beyond it gets 503 until one is
	// closed or times out.
	MaxSessions int
	// SessionsPerActor caps the stateful sessions of one actor (default a
	// quarter of MaxSessions, at least 1; at most MaxSessions), so that
	// no actor can hold them all (actorcap.go).
	SessionsPerActor int
	// SessionIdle closes a stateful HTTP session after this long without
	// a request (default DefaultSessionIdle).
	SessionIdle time.Duration
	// DrainTimeout bounds how long ChangeServers lets the calls in flight
	// on a removed server run before cancelling them (default
	// DefaultDrainTimeout).
	DrainTimeout time.Duration
	// MaxParkedCalls caps the calls of 2026-07-28 clients parked on an
	// older server's request, waiting for the client's retry (park.go;
	// default DefaultMaxParkedCalls); a server's request beyond it gets an
	// error.
	MaxParkedCalls int
	// ParkedPerActor caps the parked calls of one actor (default a
	// quarter of MaxParkedCalls, at least 1; at most MaxParkedCalls).
	ParkedPerActor int
	// MaxSubscriptions caps the resource subscriptions the front's
	// sessions hold in all, a URI counted once per session (default
	// DefaultMaxSubscriptions); SubscriptionsPerActor caps one actor's
	// (default a quarter of MaxSubscriptions, at least 1) and
	// SubscriptionsPerSession one session's (default
	// DefaultSubscriptionsPerSession). A resources/subscribe (or a URI of a
	// subscriptions/listen) beyond them is refused, and nothing is
	// subscribed downstream.
	MaxSubscriptions, SubscriptionsPerActor, SubscriptionsPerSession int
	// ParkTimeout bounds how long a parked call waits for its client's
	// retry (default DefaultParkTimeout); then the server's request gets
	// an error.
	ParkTimeout time.Duration
	// StartTimeout bounds how long New waits for the downstream servers'
	// first connection before serving without the slow ones (default 30s).
	StartTimeout time.Duration

	netHTTPOnly bool // tests: the fast path's POSTs use net/http's client, also to plain-HTTP servers
}

// A Proxy is an MCP server in front of downstream MCP servers. It serves
// their tools, resources, resource templates and prompts under namespaced
// names, forwards notifications and server-initiated requests both ways,
// and records every tools/call as a call entry in the log before the
// result reaches the client.
type Proxy struct {
	opts   Options
	logger *slog.Logger
	server *mcp.Server
	// The running servers (servers.go): ds is replaced, never changed in
	// place, under dsMu; serversMu orders AddServer and ChangeServers.
	dsMu      sync.RWMutex
	ds        []*downstream
	live      map[string]*live
	serversMu sync.Mutex

	sources sync.Map // *downstream -> its *source.Resolver, made on first use (call.go)
	removed sync.Map // removedName -> id of the removed server it was (drain.go)
	// testingOnlyStartBound replaces startBound's connectTimeout if not zero.
	testingOnlyStartBound time.Duration

	router *router // front name -> server (router.go)

	mu     sync.Mutex
	subs   map[string]int                      // front resource URI -> front sessions subscribed to it
	subsBy map[*mcp.ServerSession]*sessionSubs // front session -> the URIs it is subscribed to (subsession.go)
	subsOf shares                              // actor -> the subscriptions its sessions hold (URIs per session)
	nsubs  int                                 // the subscriptions all sessions hold (URIs per session)

	sessions       sync.Map // front HTTP session id -> *frontSession (httpfront.go)
	sessionActors  sync.Map // *mcp.ServerSession -> the actor whose stateful HTTP session it is (actorcap.go)
	sessionsMu     sync.Mutex
	sessionShares  shares        // actor -> its stateful HTTP sessions, and initializes under way (actorcap.go)
	initActors     sync.Map      // *mcp.ServerSession -> actor of its initialize request, or of its sessionless request
	logLevels      sync.Map      // *mcp.ServerSession -> the mcp.LoggingLevel its client set (bridge.go)
	retries        retries       // input_required results awaiting their clients' retries (bridge.go)
	parked         parking       // 2026-07-28 clients' calls waiting on their retries (parking.go, park.go)
	fastCalls      atomic.Uint64 // tools/calls the fast path served (for tests)
	pipeCalls      atomic.Uint64 // tools/calls the pipe front served itself (for tests)
	statelessCalls atomic.Uint64 // 2026-07-28 tools/calls the HTTP front served itself (for tests)
	kept           keptStreams   // finished call streams kept for a resume (callstream.go)
	noFastPath     bool          // tests: serve every request through the SDK
	writeTimeout   time.Duration // tests: how long a client may take none of an answer (streamWriteTimeout if 0)
	noPark         bool          // tests: no parked calls (park.go), to measure what they cost
	reaper         sync.Once
	// testingOnlyBeforeReap runs in reapPass between deciding that a
	// session is idle and closing it; testingOnlyBeforeForget, after a
	// front HTTP session ended and before the proxy forgets it.
	testingOnlyBeforeReap, testingOnlyBeforeForget func()
	// testingOnlyAnswered runs once a fast-path call's answer is written.
	testingOnlyAnswered func()

	progress  sync.Map // downstream progress token -> *progressRoute
	nextToken atomic.Uint64

	ctx    context.Context // the downstream supervisors' lifetime
	cancel context.CancelFunc
	// streamsEnd is closed once the HTTP front stops (EndStreams): its
	// clients' GET streams end then.
	streamsEnd chan struct{}
	endStreams sync.Once
	wg         sync.WaitGroup
	// recheckRounds counts the rounds of checking sessions' tokens again
	// (sessiontoken.go).
	recheckRounds atomic.Int64
	closed        atomic.Bool
	// stopping is set once the sidecar begins to stop: a call cut off
	// from then on is the sidecar's doing, not its client's (classify).
	stopping atomic.Bool
}

// New starts a proxy for opts.Servers. It starts every downstream server
// and waits (at most opts.StartTimeout) for each one's first connection;
// a server that fails to start is reported and retried with backoff in the
// background, which is not an error. It fails on a bad config, and when
// servers configured with an empty prefix give two tools, prompts or
// resources the same name.
func New(ctx context.Context, opts Options) (*Proxy, error) {
	if opts.Log == nil {
		return nil, errors.New("proxy: Options.Log is required")
	}
	if err := CheckServers(opts.Servers); err != nil {
		return nil, err
	}
	for _, s := range opts.Servers {
		if s.Retain == RetainFull && opts.Blobs == nil {
			return nil, fmt.Errorf("proxy: server %q retains full results, but there is no blob store", s.ID)
		}
	}
	if opts.Version == "" {
		opts.Version = "devel"
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	opts.shareCaps()
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		opts:   opts,
		logger: logger,
		router: newRouter(),
		subs:   map[string]int{},
		subsBy: map[*mcp.ServerSession]*sessionSubs{},
		subsOf: shares{}, sessionShares: shares{}, streamsEnd: make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.server = mcp.NewServer(&mcp.Implementation{Name: "provlog", Title: "provlog audit proxy", Version: opts.Version}, &mcp.ServerOptions{
		Logger: slog.New(sdkLogHandler{logger.Handler(), p}),
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		InitializedHandler: p.sessionInitialized,
		CompletionHandler:  p.complete,
		SubscribeHandler:   p.subscribe,
		UnsubscribeHandler: p.unsubscribe,
	})
	if opts.Tracer != nil {
		p.server.AddReceivingMiddleware(p.guard, p.traceRequests, p.serveTools, rawReads, p.rawLists)
	} else {
		p.server.AddReceivingMiddleware(p.guard, p.serveTools, rawReads, p.rawLists)
	}
	p.addOwnTools()

	for i := range opts.Servers {
		p.start(newDownstream(p, opts.Servers[i]), nil)
	}
	// At most StartTimeout in all (a second server that hangs too is
	// not waited for again), saying after a second what it waits for.
	deadline := time.NewTimer(opts.StartTimeout)
	defer deadline.Stop()
	slow := time.NewTimer(time.Second)
	defer slow.Stop()
waiting:
	for _, d := range p.ds {
		for {
			select {
			case <-d.sup.firstDone:
				continue waiting
			case <-slow.C:
				logger.Info("proxy: waiting for a server's first connection before serving", "server", d.cfg.ID, "at_most", opts.StartTimeout)
			case <-deadline.C:
				logger.Warn("proxy: serving before every server connected; they are retried in the background", "start_timeout", opts.StartTimeout)
				break waiting
			case <-ctx.Done():
				p.Close()
				return nil, ctx.Err()
			}
		}
	}
	var collisions []string
	for _, d := range p.ds {
		if d.cfg.toolPrefix() == "" || d.cfg.uriPrefix() == "" {
			collisions = append(collisions, d.cat.collisionList()...)
		}
	}
	if len(collisions) > 0 {
		p.Close()
		sort.Strings(collisions)
		return nil, fmt.Errorf("proxy: servers with an empty prefix collide: %s; give them a prefix", strings.Join(collisions, "; "))
	}
	return p, nil
}

// Server returns the front MCP server, so that cmd can add its own tools.
func (p *Proxy) Server() *mcp.Server { return p.server }

// HTTPHandler serves MCP over streamable HTTP (mount it at /mcp). Every
// request needs "Authorization: Bearer <token>" that a authenticates as an
// actor (not a reader); a request without one gets a's 401 challenge, a
// tools/call (or resources/read, prompts/get) whose token lacks the scopes
// of its tool group a 403 (see package [authn]). The actor becomes the request's
// TokenInfo.UserID, which the SDK also checks against the session's, so
// one actor cannot use another's session; the OAuth token's claims go into
// every entry the request writes (log.WithAuth). Bodies over
// MaxRequestBytes get 413. Host and Origin are not checked here: wrap the
// sidecar's whole handler in [Front], which checks them for every path.
//
// Clients of protocol revisions up to 2025-11-25 get stateful sessions;
// requests of the sessionless 2026-07-28 revision (by their
// Mcp-Protocol-Version header) go to a stateless handler on the same
// server, as go-sdk serves that revision only statelessly. Stateless
// requests cannot carry server-to-client requests, so sampling and
// elicitation from a downstream server reach only stateful clients.
func (p *Proxy) HTTPHandler(a *authn.Authenticator) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return p.server }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:              p.logger,
		MaxRequestBodyBytes: p.opts.MaxRequestBytes,
		// No SessionTimeout: the SDK's idle timer does not see the calls
		// of the fast path, so the proxy closes idle sessions itself.
		// Front checks Host and Origin for every path, this one's too.
		DisableLocalhostProtection: true,
	})
	p.reaper.Do(func() {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.reapSessions(p.ctx, min(time.Minute, p.opts.SessionIdle/4), p.opts.SessionIdle)
		}()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.recheckSessions(p.ctx, a, sessionRecheck)
		}()
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// A 2026-07-28 request is its POST: a client that gave it up
		// (went away, or its deadline passed) ended the POST, and the
		// call, cancelled with it, is cancelled at the server too, as a
		// 2025-11-25 client's is by its notifications/cancelled (the
		// fast path's calls run in the POST's context as well).
		PropagateRequestCancellation: true,
		Logger:                       p.logger,
		MaxRequestBodyBytes:          p.opts.MaxRequestBytes,
		DisableLocalhostProtection:   true,
	})
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pb, ok := p.oneMessage(w, r)
		if !ok {
			return
		}
		body := pb.raw
		p.handOverID(r, body)
		if id := identityOf(r.Context()); id != nil && body != nil {
			if err := p.checkScopes(a, id, body); err != nil {
				a.WriteError(w, err)
				return
			}
		}
		// Only the revision itself: a later or malformed one is refused by
		// the stateful handler as unsupported, as an earlier unknown one is.
		if r.Header.Get("Mcp-Protocol-Version") == statelessProtocol {
			if !p.fastStateless(w, r, pb) {
				p.serveSDK(stateless, w, r)
			}
			return
		}
		release, ok := p.admitSession(w, r)
		if !ok {
			return
		}
		defer release()
		if r.Method == http.MethodGet {
			var end func()
			r, end = p.endingStream(r)
			defer end()
		}
		p.serveStateful(w, r, pb, stateful)
	})
	// The SDK's middleware sets the TokenInfo its sessions check (it alone
	// can); the identity it carries was authenticated below, once.
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		id := identityOf(ctx)
		if id == nil {
			return nil, fmt.Errorf("%w: not authenticated", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: id.Actor, Scopes: id.Scopes, Extra: map[string]any{identityExtra: id, placeExtra: new(sessionPlace)}}, nil
	}
	sdk := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.Request(r)
		if err == nil && id.Reader {
			err = &authn.Error{Status: http.StatusForbidden, Description: "a reader token may read the log, not act: use an actor's token for /mcp"}
		}
		if err != nil {
			a.WriteError(w, err)
			return
		}
		// The SDK runs a request's handler in the request's context, as the
		// fast path does, so the entries either writes find the claims
		// there (TestOAuthEntries holds both paths to it).
		ctx := context.WithValue(r.Context(), identityKey{}, id)
		p.noteCredential(r, id) // a session's: this token is what it lasts by now
		sdk.ServeHTTP(w, r.WithContext(log.WithAuth(ctx, id.Auth)))
		p.noteCredential(r, id) // a session the request initialized
	})
}

// EndStreams ends the HTTP front's GET streams, those of its clients'
// sessions for the server's own messages, and every one opened from then
// on: the sidecar's HTTP server calls it as it begins to stop, as it
// waits for its requests to end, which such a stream never does by
// itself. The stop waited for a connected client's stream (a joined
// stdio serve keeps one) until its timeout, and exited 1
// (TestSidecarStopsWithJoinedClient). The sessions go on, and their
// requests under way are given their time.
func (p *Proxy) EndStreams() { p.endStreams.Do(func() { close(p.streamsEnd) }) }

// endingStream is r, a GET stream's request, with a context that ends
// with EndStreams too; end releases it once the stream ended.
func (p *Proxy) endingStream(r *http.Request) (_ *http.Request, end func()) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-p.streamsEnd:
			cancel()
		case <-ctx.Done():
		}
	}()
	return r.WithContext(ctx), cancel
}

// Close stops the downstream servers and waits for their supervisors.
// A request that comes from then on is refused, saying so, before
// anything is written or forwarded; the calls under way are cut off at
// once (the sidecar gave its fronts' requests their time before it
// closes the proxy) and recorded so, "cut off: provlog was stopping",
// before Close returns and the caller closes the log: Close waits (at
// most the drain timeout) for every request its servers' gates let in
// to end, as a removed server's drain does. They were not: a stdio
// server's session waited for its calls to end by their timeouts before
// it closed, and a call whose outcome came once the log was closed stood
// in it as a call with no result, as a crash leaves one.
func (p *Proxy) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.stopping.Store(true)
	p.cancel()
	var idles []<-chan struct{}
	var cut []context.CancelFunc
	for _, d := range p.downstreams() {
		idles = append(idles, d.gate.close())
		cs, _ := d.gate.expire()
		cut = append(cut, cs...)
	}
	for _, c := range cut {
		c()
	}
	var wg sync.WaitGroup
	for _, d := range p.downstreams() {
		wg.Go(d.stop) // each may wait for its process to exit
	}
	wg.Wait()
	t := time.NewTimer(p.drainTimeout())
	defer t.Stop()
	select {
	case <-allClosed(idles):
	case <-t.C:
		p.logger.Warn("proxy: stopped with requests still under way; a call among them stays in the log as a call without a result", "waited", p.drainTimeout())
	}
	p.wg.Wait()
	return nil
}

// guard turns a panic in any front handler into a JSON-RPC error, so a bad
// downstream (or a bug here) cannot crash the sidecar.
func (p *Proxy) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				p.logger.Error("proxy: panic while handling a request", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "provlog: internal error while handling " + method}
			}
		}()
		defer p.heldBy(req)()
		ctx = requestIdentity(ctx, req)
		p.noteActor(method, req)
		p.noteLogLevel(method, req)
		if err := p.refuseRemoved(req); err != nil {
			return nil, err
		}
		if err := p.listenFits(req); err != nil {
			return nil, err
		}
		res, err = next(ctx, method, req)
		return res, writableError(err)
	}
}

// writableError returns err, or, if it is a JSON-RPC error whose data is
// no JSON, the error without its data: go-sdk cannot write such an answer
// and ends the session instead. Its not-found error for a resources/read
// quotes the URI Go's way, so a URI holding a control character ("\x7f")
// ended the client's session.
func writableError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && len(we.Data) > 0 && !json.Valid(we.Data) {
		return &jsonrpc.Error{Code: we.Code, Message: we.Message}
	}
	return err
}

// rpcError returns a JSON-RPC error the SDK sends as it is.
func rpcError(code int64, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// localCodes are the codes of the SDK's own connection errors, which are
// *jsonrpc.Error values too: "client is closing", "server is closing",
// "rejected by transport". (Tool calls tell these apart exactly, by the
// captured response; see capture.go.)
var localCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// forwardError returns a downstream error for the upstream client: a
// JSON-RPC error as the downstream sent it (the SDK would otherwise replace
// its message and drop its data), anything else as an internal error
// naming the server.
func forwardError(server string, err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && !localCodes[we.Code] && !errors.Is(err, mcp.ErrConnectionClosed) {
		return we
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return rpcError(jsonrpc.CodeInternalError, "provlog: server %q: %v", server, err)
}
