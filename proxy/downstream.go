package proxy

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A downstream is one configured server, in three rooms: its supervisor
// (supervisor.go: the connection and process, restarts, health), its
// catalogue (catalogue.go: what it offers at the front, kept in step with
// its lists) and the calls in progress on it (router.go: where its own
// requests and messages go back to). The router (router.go) maps front
// names to downstreams. What it does with a call is in call.go and
// record.go, with a read in forward.go.
type downstream struct {
	p   *Proxy
	cfg ServerConfig

	sup   *supervisor
	newer newerSession // a stdio server's 2026-07-28 session, once a client of it called (revision.go)
	cat   *catalogue
	calls callers
	gate  gate // the requests let in, closed when the server is removed (drain.go)
	// handover is the start of a changed server's new instance, which
	// requests wait for (nil: not one); next is the instance that replaced
	// this one, which requests its closed gate refuses go on to.
	handover *handover
	next     atomic.Pointer[downstream]

	httpClient  *http.Client // HTTP servers: the fast path's client, sharing the SDK's connection pool
	http1       *http1Pool   // plain-HTTP servers: the fast path's own connections (nil: httpClient)
	http1Header []byte       // the configured and fixed header lines of http1's requests

	secrets   recentSecrets // redacted values of its latest calls, kept off the proxy's log
	byActor   actorSecrets  // the same, each actor's apart, kept off its entries and answers
	creds     []string      // the credentials its config gives it (ServerConfig.credentials), kept off both
	credCores *coreSet      // their base64Cores, made once for the lines of its stderr

	listens listens // the subscriptions held on its session of the 2026-07-28 revision (listen.go)

	asks atomic.Pointer[askBudget] // its newest connection's budget of its requests (askbudget.go)
}

func newDownstream(p *Proxy, cfg ServerConfig) *downstream {
	var hc *http.Client
	if cfg.URL != "" {
		// Its own pool, wide enough for every concurrent call: the default
		// keeps 2 idle connections per host, so under load most calls
		// would open a new connection to the downstream.
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConns, base.MaxIdleConnsPerHost = 512, 512
		hc = &http.Client{Transport: base}
	}
	var http1 *http1Pool
	var http1Header []byte
	if u, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" && !p.opts.netHTTPOnly {
		http1Header, err = renderHeader(cfg.Headers)
		if err == nil {
			http1 = newHTTP1Pool(u)
		}
	}
	d := &downstream{
		httpClient:  hc,
		http1:       http1,
		http1Header: http1Header,
		p:           p,
		cfg:         cfg,
		calls:       callers{server: cfg.ID},
		creds:       cfg.credentials(),
	}
	d.credCores = newCoreSet(base64Cores(d.creds))
	d.cat = newCatalogue(d)
	d.sup = newSupervisor(cfg.ID, p.logger, d.connect, func(ctx context.Context, cs *mcp.ClientSession) {
		d.cat.syncAll(ctx, cs)
		p.resubscribe(ctx, d, cs)
	}, func(text string) string { return d.logText(text, nil) })
	return d
}

// run supervises the server until ctx is done.
func (d *downstream) run(ctx context.Context) {
	defer d.p.wg.Done()
	d.cat.resyncLoops(ctx)
	if d.handover != nil {
		go d.watchStart(ctx)
	}
	d.newer.setContext(ctx)
	d.sup.run(ctx)
	d.newer.wait()
}

// stop closes the current session, which stops a stdio server's process,
// and the fast path's idle connections.
func (d *downstream) stop() {
	d.sup.stop()
	d.newer.stop()
	if d.http1 != nil {
		d.http1.closeIdle()
	}
	if d.httpClient != nil {
		d.httpClient.CloseIdleConnections()
	}
}

// session returns the current session, or an error saying why there is
// none.
func (d *downstream) session() (*mcp.ClientSession, error) { return d.sup.session() }

// ending notes that cs's connection failed, with whichever of the
// server's supervisors holds it (its newer session's, if any).
func (d *downstream) ending(cs *mcp.ClientSession) {
	if cs == nil {
		return // it failed as it connected: Connect fails
	}
	d.sup.ending(cs)
	d.newer.mu.Lock()
	sup := d.newer.sup
	d.newer.mu.Unlock()
	if sup != nil {
		sup.ending(cs)
	}
}

func (d *downstream) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	return d.connectAt(ctx, d.askProtocol())
}

// connectAt opens a session to the server asking for protocol revision
// ask ("": the newest, see askProtocol).
func (d *downstream) connectAt(ctx context.Context, ask string) (*mcp.ClientSession, *process, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "provlog", Version: d.p.opts.Version}, &mcp.ClientOptions{
		Logger: d.p.logger,
		// No roots: the proxy has none to give, and advertising them
		// changes what some servers offer (research/mcp.md §1.5.4).
		// Sampling and elicitation are added by their handlers.
		Capabilities:             &mcp.ClientCapabilities{},
		CreateMessageHandler:     d.createMessage,
		ElicitationHandler:       d.elicit,
		ToolListChangedHandler:   func(_ context.Context, req *mcp.ToolListChangedRequest) { d.cat.listChanged(req.Session, toolSlot) },
		PromptListChangedHandler: func(_ context.Context, req *mcp.PromptListChangedRequest) { d.cat.listChanged(req.Session, promptSlot) },
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) {
			d.cat.listChanged(req.Session, resourceSlot, templateSlot)
		},
		ResourceUpdatedHandler: d.resourceUpdated,
		LoggingMessageHandler:  d.logMessage,
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			d.p.routeProgress(ctx, req.Params)
		},
		KeepAlive:                 30 * time.Second,
		KeepAliveFailureThreshold: 3,
		// A server's input_required results go to the client whose call
		// it is (SEP-2322), not answered here.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	client.AddReceivingMiddleware(d.p.guard, d.forwardServerRequests, d.noteListenAcks)

	var base http.RoundTripper
	if d.httpClient != nil {
		base = d.httpClient.Transport
	}
	var session atomic.Pointer[mcp.ClientSession]
	asks := &askBudget{warn: func(dropped int) {
		d.p.logger.Warn("proxy: a server's requests are past their budget; one was refused, the rest of this second's go unanswered",
			"server", d.cfg.ID, "awaiting", maxServerRequests, "per_second", maxServerRequestsPerSecond, "burst", maxServerRequestsBurst, "unanswered_before", dropped)
	}, refuse: func(id []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.send(ctx, session.Load(), appendResponse(nil, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errAsks})); err != nil {
			d.p.logger.Warn("proxy: answering a server's request failed", "server", d.cfg.ID, "error", d.logText(err.Error(), nil))
		}
	}}
	d.asks.Store(asks)
	t, cmd := transportFor(d.cfg, base, &lineLogger{d: d}, d.watchListens(&session), asks)
	if ct, ok := t.(*captureTransport); ok {
		ct.notify = d.inOrder
		ct.ended = func() { d.ending(session.Load()) }
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: ask})
	if err != nil {
		endProcess(cmd)
		return nil, nil, err
	}
	session.Store(cs)
	// Ask for every log message; the front server filters them per
	// client session by the level each client set.
	if caps := cs.InitializeResult().Capabilities; caps != nil && caps.Logging != nil {
		lctx, lcancel := context.WithTimeout(ctx, connectTimeout)
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			// The server's refusal is its text; on the first connect no
			// redacted value is known yet, on a later one its calls' are.
			d.p.logger.Debug("proxy: downstream refused logging/setLevel", "server", d.cfg.ID, "error", d.secrets.scrub(err.Error()))
		}
		lcancel()
	}
	return cs, cmd, nil
}

// logText is text made of what a server or a client sent (an error's, a
// panic's) as the proxy's log may hold it: scrubbed of the server's
// latest redacted values (a server may quote in one call's error what an
// earlier call had redacted), of those of the call it is about (nil:
// none), which many calls after it may have pushed out of the server's,
// and of the credentials its config gives it.
func (d *downstream) logText(text string, call *callSecrets) string {
	return scrub(d.secrets.scrub(d.cfg.redactURL(text)), append(call.all(), d.creds...))
}

// entryText is logText for a call.result entry of actor's: scrubbed of
// actor's latest values, not every actor's (recentSecrets).
func (d *downstream) entryText(actor, text string, call *callSecrets) string {
	return scrub(d.secretsOf(actor).scrub(d.cfg.redactURL(text)), append(call.all(), d.creds...))
}

// remember notes secrets, redacted values actor sent or was sent, as the
// server's and as actor's.
func (d *downstream) remember(actor string, secrets []string) {
	d.secrets.remember(secrets)
	d.byActor.remember(actor, secrets)
}

// secretsOf returns actor's recent redacted values on d.
func (d *downstream) secretsOf(actor string) *recentSecrets { return d.byActor.of(actor) }

// health is a server's entry in provlog__status.
func (d *downstream) health() map[string]any {
	st := d.sup.status()
	h := map[string]any{
		"id":       d.cfg.ID,
		"state":    st.state,
		"since":    st.since.UTC().Format(time.RFC3339),
		"restarts": st.restarts,
		"inflight": d.calls.count(),
	}
	if len(d.cfg.Command) > 0 {
		h["transport"] = "stdio"
	} else {
		h["transport"] = "http"
	}
	if st.lastErr != "" {
		h["last_error"] = st.lastErr
	}
	if r := st.init; r != nil {
		h["protocol_version"] = r.ProtocolVersion
		if r.ServerInfo != nil {
			h["server_info"] = map[string]any{"name": r.ServerInfo.Name, "version": r.ServerInfo.Version}
		}
	}
	d.newer.report(h)
	d.cat.report(h)
	return h
}
