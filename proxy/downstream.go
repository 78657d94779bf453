package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Health states of a downstream server, as provlog__status reports them.
const (
	StateStarting = "starting" // first connection under way
	StateUp       = "up"
	StateDown     = "down" // crashed or unreachable; being restarted with backoff
	StateStopped  = "stopped"
)

const (
	connectTimeout   = 30 * time.Second
	terminateTimeout = 2 * time.Second
	// stableAfter is how long a session must last for the restart backoff
	// to start over.
	stableAfter = 30 * time.Second
)

// A downstream is one configured server: its current session (nil while
// down), its supervisor, and what the proxy registered for it.
type downstream struct {
	p   *Proxy
	cfg ServerConfig

	httpClient *http.Client // HTTP servers: the fast path's client, sharing the SDK's connection pool
	h1         *h1Pool      // plain-HTTP servers: the fast path's own connections (nil: httpClient)
	h1Header   []byte       // the configured and fixed header lines of h1's requests

	secrets recentSecrets // redacted values of its latest calls, kept off the proxy's log

	firstDone chan struct{} // closed once the first connection attempt is over
	syncMu    sync.Mutex    // one sync at a time
	resync    chan struct{} // list_changed notifications, coalesced

	mu         sync.Mutex
	cs         *mcp.ClientSession
	cmd        *exec.Cmd // the running process (stdio servers)
	state      string
	lastErr    string
	restarts   int
	since      time.Time
	tools      map[string]string // front name -> downstream name
	prompts    map[string]string
	resources  map[string]string // front URI -> downstream URI
	templates  map[string]string // front URI template -> downstream template
	collisions map[string]bool
	skipped    map[string]string // downstream tool name -> why the proxy could not serve it
	defs       map[string]string // kind+" "+front name -> the raw definition registered
	toolSums   map[string]string // front tool name -> its definition's hash (definitionSum)
	listed     map[string]string // tool name -> definition hash, as last recorded in a tools entry (nil: not yet)
	changes    []ToolChange      // definitions changed while the proxy ran
	inflight   map[uint64]*inflightCall
}

// An inflightCall is an upstream tools/call waiting on this server; a
// sampling or elicitation request, or a log message, from the server goes
// to the session that made it.
type inflightCall struct {
	session *mcp.ServerSession
	ctx     context.Context
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
	var h1 *h1Pool
	var h1Header []byte
	if u, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" && !p.opts.netHTTPOnly {
		h1Header, err = renderHeader(cfg.Headers)
		if err == nil {
			h1 = newH1Pool(u)
		}
	}
	return &downstream{
		httpClient: hc,
		h1:         h1,
		h1Header:   h1Header,
		p:          p,
		cfg:        cfg,
		firstDone:  make(chan struct{}),
		resync:     make(chan struct{}, 1),
		state:      StateStarting,
		since:      time.Now(),
		tools:      map[string]string{},
		prompts:    map[string]string{},
		resources:  map[string]string{},
		templates:  map[string]string{},
		collisions: map[string]bool{},
		skipped:    map[string]string{},
		defs:       map[string]string{},
		toolSums:   map[string]string{},
		inflight:   map[uint64]*inflightCall{},
	}
}

// run connects, serves, and reconnects with backoff until ctx is done.
func (d *downstream) run(ctx context.Context) {
	defer d.p.wg.Done()
	first := true
	firstDone := func() {
		if first {
			first = false
			close(d.firstDone)
		}
	}
	defer firstDone()
	backoff := d.p.minBackoff
	go d.resyncLoop(ctx)
	for ctx.Err() == nil {
		cs, cmd, err := d.connect(ctx)
		if err != nil {
			d.setDown(fmt.Sprintf("connecting: %v", err))
			d.p.logger.Warn("proxy: downstream server failed to start", "server", d.cfg.ID, "error", err, "retry_in", backoff)
		} else {
			up := time.Now()
			d.mu.Lock()
			d.cs, d.cmd, d.state, d.lastErr, d.since = cs, cmd, StateUp, "", up
			d.mu.Unlock()
			d.p.logger.Info("proxy: downstream server connected", "server", d.cfg.ID, "server_info", serverInfo(cs))
			// Closing the proxy ends the session whatever run is doing.
			unwatch := context.AfterFunc(ctx, func() { cs.Close() })
			d.syncAll(ctx, cs)
			d.p.resubscribe(ctx, d, cs)
			firstDone()
			werr := cs.Wait()
			unwatch()
			d.mu.Lock()
			d.cs, d.cmd = nil, nil
			d.mu.Unlock()
			cs.Close()
			killProcessGroup(cmd)
			if ctx.Err() != nil {
				break
			}
			msg := "the server closed the connection"
			if werr != nil {
				msg = fmt.Sprintf("connection lost: %v", werr)
			}
			if time.Since(up) > stableAfter {
				backoff = d.p.minBackoff
			}
			d.setDown(msg)
			d.p.logger.Warn("proxy: downstream server went down; restarting", "server", d.cfg.ID, "error", msg, "retry_in", backoff)
		}
		firstDone()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, d.p.maxBackoff)
		d.mu.Lock()
		d.restarts++
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.state, d.since = StateStopped, time.Now()
	d.mu.Unlock()
}

func (d *downstream) setDown(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state, d.lastErr, d.since = StateDown, msg, time.Now()
}

// stop closes the current session, which stops a stdio server's process.
func (d *downstream) stop() {
	d.mu.Lock()
	cs, cmd := d.cs, d.cmd
	d.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
	killProcessGroup(cmd)
	if d.h1 != nil {
		d.h1.closeIdle()
	}
	if d.httpClient != nil {
		d.httpClient.CloseIdleConnections()
	}
}

// session returns the current session, or an error saying why there is
// none.
func (d *downstream) session() (*mcp.ClientSession, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cs != nil {
		return d.cs, nil
	}
	why := d.state
	if d.lastErr != "" {
		why += ": " + d.lastErr
	}
	return nil, fmt.Errorf("server %q is not connected (%s)", d.cfg.ID, why)
}

func (d *downstream) connect(ctx context.Context) (*mcp.ClientSession, *exec.Cmd, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "provlog", Version: d.p.opts.Version}, &mcp.ClientOptions{
		Logger: d.p.logger,
		// No roots: the proxy has none to give, and advertising them
		// changes what some servers offer (research/mcp.md §1.5.4).
		// Sampling and elicitation are added by their handlers.
		Capabilities:               &mcp.ClientCapabilities{},
		CreateMessageHandler:       d.createMessage,
		ElicitationHandler:         d.elicit,
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { d.triggerResync() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { d.triggerResync() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { d.triggerResync() },
		ResourceUpdatedHandler:     d.resourceUpdated,
		LoggingMessageHandler:      d.logMessage,
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			d.p.routeProgress(ctx, req.Params)
		},
		KeepAlive:                 30 * time.Second,
		KeepAliveFailureThreshold: 3,
		// A server's input_required results go to the client whose call
		// it is (SEP-2322), not answered here.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	client.AddReceivingMiddleware(d.p.guard, d.forwardServerRequests)

	var base http.RoundTripper
	if d.httpClient != nil {
		base = d.httpClient.Transport
	}
	t, cmd := transportFor(d.cfg, base, &lineLogger{d: d})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: d.askProtocol()})
	if err != nil {
		killProcessGroup(cmd)
		return nil, nil, err
	}
	// Ask for every log message; the front server filters them per
	// client session by the level each client set.
	if caps := cs.InitializeResult().Capabilities; caps != nil && caps.Logging != nil {
		lctx, lcancel := context.WithTimeout(ctx, connectTimeout)
		if err := cs.SetLoggingLevel(lctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			d.p.logger.Debug("proxy: downstream refused logging/setLevel", "server", d.cfg.ID, "error", err)
		}
		lcancel()
	}
	return cs, cmd, nil
}

func serverInfo(cs *mcp.ClientSession) string {
	if r := cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		return r.ServerInfo.Name + " " + r.ServerInfo.Version
	}
	return ""
}

// lineLogger passes a stdio server's stderr to the proxy's log at debug
// level, with the redacted values of the server's latest calls scrubbed
// out (a server that prints its arguments would otherwise put them in the
// sidecar's log).
type lineLogger struct {
	d   *downstream
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.d.p.logger.Debug("proxy: downstream stderr", "server", l.d.cfg.ID, "line", l.d.secrets.scrub(string(l.buf[:i])))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*lineLogger)(nil)

// triggerResync asks for the lists to be read again. It must not block:
// it runs inside the SDK's notification handler.
func (d *downstream) triggerResync() {
	select {
	case d.resync <- struct{}{}:
	default:
	}
}

func (d *downstream) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.resync:
		}
		d.mu.Lock()
		cs := d.cs
		d.mu.Unlock()
		if cs != nil {
			d.syncAll(ctx, cs)
		}
	}
}

// syncAll reads the server's tools, prompts, resources and resource
// templates and makes the front server's match them.
func (d *downstream) syncAll(ctx context.Context, cs *mcp.ClientSession) {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	sctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	warn := func(msg string, args ...any) {
		if ctx.Err() == nil { // else the proxy is closing
			d.p.logger.Warn(msg, args...)
		}
	}
	if caps.Tools != nil {
		if raws, err := listAll(sctx, cs, "tools"); err != nil {
			warn("proxy: listing tools failed", "server", d.cfg.ID, "error", err)
		} else {
			d.syncTools(raws)
		}
	}
	if caps.Prompts != nil {
		if raws, err := listAll(sctx, cs, "prompts"); err != nil {
			warn("proxy: listing prompts failed", "server", d.cfg.ID, "error", err)
		} else {
			d.syncPrompts(raws)
		}
	}
	if caps.Resources != nil {
		if raws, err := listAll(sctx, cs, "resources"); err != nil {
			warn("proxy: listing resources failed", "server", d.cfg.ID, "error", err)
		} else {
			d.syncResources(raws)
		}
		if raws, err := listAll(sctx, cs, "resourceTemplates"); err != nil {
			warn("proxy: listing resource templates failed", "server", d.cfg.ID, "error", err)
		} else {
			d.syncTemplates(raws)
		}
	}
}

// listAll pages through one list method and returns its items as the
// server sent them (see capture.go).
func listAll(ctx context.Context, cs *mcp.ClientSession, key string) ([]json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	for range 1000 {
		cp := &capture{}
		cctx := withCapture(ctx, cp)
		var next string
		var typed any
		var err error
		switch key {
		case "tools":
			var r *mcp.ListToolsResult
			if r, err = cs.ListTools(cctx, &mcp.ListToolsParams{Cursor: cursor}); err == nil {
				next, typed = r.NextCursor, r.Tools
			}
		case "prompts":
			var r *mcp.ListPromptsResult
			if r, err = cs.ListPrompts(cctx, &mcp.ListPromptsParams{Cursor: cursor}); err == nil {
				next, typed = r.NextCursor, r.Prompts
			}
		case "resources":
			var r *mcp.ListResourcesResult
			if r, err = cs.ListResources(cctx, &mcp.ListResourcesParams{Cursor: cursor}); err == nil {
				next, typed = r.NextCursor, r.Resources
			}
		case "resourceTemplates":
			var r *mcp.ListResourceTemplatesResult
			if r, err = cs.ListResourceTemplates(cctx, &mcp.ListResourceTemplatesParams{Cursor: cursor}); err == nil {
				next, typed = r.NextCursor, r.ResourceTemplates
			}
		}
		raw := cp.last()
		cp.done()
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		var list []json.RawMessage
		if raw != nil && json.Unmarshal(raw, &page) == nil && json.Unmarshal(page[key], &list) == nil {
			items = append(items, list...)
		} else {
			// Not expected: the result went by without being captured.
			// Fall back to the SDK's re-encoding of the typed items.
			b, err := json.Marshal(typed)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &list); err != nil {
				return nil, err
			}
			items = append(items, list...)
		}
		if next == "" {
			return items, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("listing %s: more than 1000 pages", key)
}

// addGuarded runs an SDK Add* call, turning its panic (the SDK panics on
// schemas and URIs it rejects) into an error.
func addGuarded(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	add()
	return nil
}

// claim records front as d's in owners unless another server or the proxy
// itself holds it. It reports whether d may register it.
func (d *downstream) claim(owners map[string]*downstream, front string, own bool) bool {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	if o := owners[front]; (o != nil && o != d) || own {
		if !d.collisions[front] {
			d.p.logger.Warn("proxy: name taken by another server; skipped", "server", d.cfg.ID, "name", front)
		}
		d.mu.Lock()
		d.collisions[front] = true
		d.mu.Unlock()
		return false
	}
	owners[front] = d
	return true
}

func (d *downstream) release(owners map[string]*downstream, front string) {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	if owners[front] == d {
		delete(owners, front)
	}
}

func (d *downstream) collisionList() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for n := range d.collisions {
		out = append(out, fmt.Sprintf("%s (server %q)", n, d.cfg.ID))
	}
	return out
}

func (d *downstream) syncTools(raws []json.RawMessage) {
	d.recordTools(raws)
	prefix := d.cfg.toolPrefix()
	want := map[string]bool{}
	skipped := map[string]string{}
	for _, raw := range raws {
		var t mcp.Tool
		var schemas struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		}
		if err := json.Unmarshal(raw, &schemas); err != nil || schemas.Name == "" {
			d.p.logger.Warn("proxy: skipping a tool that is not a JSON object with a name", "server", d.cfg.ID)
			continue
		}
		name := schemas.Name
		if err := json.Unmarshal(raw, &t); err != nil {
			skipped[name] = err.Error()
			continue
		}
		front := prefix + name
		// The schemas go out exactly as the server gave them.
		t.Name = front
		t.InputSchema, t.OutputSchema = nil, nil
		if len(schemas.InputSchema) > 0 && string(schemas.InputSchema) != "null" {
			t.InputSchema = schemas.InputSchema
		}
		if len(schemas.OutputSchema) > 0 && string(schemas.OutputSchema) != "null" {
			t.OutputSchema = schemas.OutputSchema
		}
		if !d.claim(d.p.toolOwner, front, isOwnTool(front)) {
			continue
		}
		if d.unchanged("tool", front, raw) {
			want[front] = true
			continue
		}
		if err := addGuarded(func() { d.p.server.AddTool(&t, d.toolHandler(front, name)) }); err != nil {
			d.release(d.p.toolOwner, front)
			skipped[name] = err.Error()
			continue
		}
		want[front] = true
		d.mu.Lock()
		d.tools[front] = name
		d.defs["tool "+front] = string(raw)
		d.toolSums[front] = definitionSum(raw)
		d.mu.Unlock()
	}
	for name, why := range skipped {
		d.mu.Lock()
		_, known := d.skipped[name]
		d.mu.Unlock()
		if !known {
			d.p.logger.Warn("proxy: skipping a tool the SDK rejects", "server", d.cfg.ID, "tool", name, "error", why)
		}
	}
	var gone []string
	d.mu.Lock()
	d.skipped = skipped
	for front := range d.tools {
		if !want[front] {
			gone = append(gone, front)
			delete(d.tools, front)
			delete(d.defs, "tool "+front)
			delete(d.toolSums, front)
		}
	}
	d.mu.Unlock()
	if len(gone) > 0 {
		d.p.server.RemoveTools(gone...)
		for _, f := range gone {
			d.release(d.p.toolOwner, f)
		}
	}
}

func (d *downstream) syncPrompts(raws []json.RawMessage) {
	prefix := d.cfg.toolPrefix()
	want := map[string]bool{}
	for _, raw := range raws {
		var pr mcp.Prompt
		if err := json.Unmarshal(raw, &pr); err != nil || pr.Name == "" {
			continue
		}
		name := pr.Name
		front := prefix + name
		pr.Name = front
		if !d.claim(d.p.promptOwner, front, false) {
			continue
		}
		if d.unchanged("prompt", front, raw) {
			want[front] = true
			continue
		}
		if err := addGuarded(func() { d.p.server.AddPrompt(&pr, d.promptHandler(name)) }); err != nil {
			d.release(d.p.promptOwner, front)
			d.p.logger.Warn("proxy: skipping a prompt the SDK rejects", "server", d.cfg.ID, "prompt", name, "error", err)
			continue
		}
		want[front] = true
		d.mu.Lock()
		d.prompts[front] = name
		d.defs["prompt "+front] = string(raw)
		d.mu.Unlock()
	}
	var gone []string
	d.mu.Lock()
	for front := range d.prompts {
		if !want[front] {
			gone = append(gone, front)
			delete(d.prompts, front)
			delete(d.defs, "prompt "+front)
		}
	}
	d.mu.Unlock()
	if len(gone) > 0 {
		d.p.server.RemovePrompts(gone...)
		for _, f := range gone {
			d.release(d.p.promptOwner, f)
		}
	}
}

func (d *downstream) syncResources(raws []json.RawMessage) {
	up := d.cfg.uriPrefix()
	want := map[string]bool{}
	for _, raw := range raws {
		var r mcp.Resource
		if err := json.Unmarshal(raw, &r); err != nil || r.URI == "" {
			continue
		}
		orig := r.URI
		front := up + orig
		r.URI = front
		if !d.claim(d.p.resOwner, front, false) {
			continue
		}
		if d.unchanged("resource", front, raw) {
			want[front] = true
			continue
		}
		if err := addGuarded(func() { d.p.server.AddResource(&r, d.readResource) }); err != nil {
			d.release(d.p.resOwner, front)
			d.p.logger.Warn("proxy: skipping a resource the SDK rejects", "server", d.cfg.ID, "uri", orig, "error", err)
			continue
		}
		want[front] = true
		d.mu.Lock()
		d.resources[front] = orig
		d.defs["resource "+front] = string(raw)
		d.mu.Unlock()
	}
	var gone []string
	d.mu.Lock()
	for front := range d.resources {
		if !want[front] {
			gone = append(gone, front)
			delete(d.resources, front)
			delete(d.defs, "resource "+front)
		}
	}
	d.mu.Unlock()
	if len(gone) > 0 {
		d.p.server.RemoveResources(gone...)
		for _, f := range gone {
			d.release(d.p.resOwner, f)
		}
	}
}

func (d *downstream) syncTemplates(raws []json.RawMessage) {
	up := d.cfg.uriPrefix()
	want := map[string]bool{}
	for _, raw := range raws {
		var t mcp.ResourceTemplate
		if err := json.Unmarshal(raw, &t); err != nil || t.URITemplate == "" {
			continue
		}
		orig := t.URITemplate
		front := up + orig
		t.URITemplate = front
		if !d.claim(d.p.resOwner, front, false) {
			continue
		}
		if d.unchanged("template", front, raw) {
			want[front] = true
			continue
		}
		if err := addGuarded(func() { d.p.server.AddResourceTemplate(&t, d.readResource) }); err != nil {
			d.release(d.p.resOwner, front)
			d.p.logger.Warn("proxy: skipping a resource template the SDK rejects", "server", d.cfg.ID, "uri_template", orig, "error", err)
			continue
		}
		want[front] = true
		d.mu.Lock()
		d.templates[front] = orig
		d.defs["template "+front] = string(raw)
		d.mu.Unlock()
	}
	var gone []string
	d.mu.Lock()
	for front := range d.templates {
		if !want[front] {
			gone = append(gone, front)
			delete(d.templates, front)
			delete(d.defs, "template "+front)
		}
	}
	d.mu.Unlock()
	if len(gone) > 0 {
		d.p.server.RemoveResourceTemplates(gone...)
		for _, f := range gone {
			d.release(d.p.resOwner, f)
		}
	}
}

// beginCall notes an upstream call in progress on this server.
func (d *downstream) beginCall(ss *mcp.ServerSession, ctx context.Context) uint64 {
	id := d.p.nextCall.Add(1)
	d.mu.Lock()
	d.inflight[id] = &inflightCall{session: ss, ctx: ctx}
	d.mu.Unlock()
	return id
}

func (d *downstream) endCall(id uint64) {
	d.mu.Lock()
	delete(d.inflight, id)
	d.mu.Unlock()
}

// caller returns the upstream call a server-initiated message belongs to:
// MCP does not tie such a message to the call that caused it, so it goes
// to the one client session with calls in progress on this server (its
// latest call). With none, or with calls from several sessions, there is
// no telling, and the error says so.
func (d *downstream) caller(what string) (*inflightCall, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var latest uint64
	sessions := map[*mcp.ServerSession]bool{}
	for id, c := range d.inflight {
		sessions[c.session] = true
		latest = max(latest, id)
	}
	switch {
	case len(sessions) == 0:
		return nil, fmt.Errorf("provlog: no client call is in progress on server %q to send its %s to", d.cfg.ID, what)
	case len(sessions) > 1:
		return nil, fmt.Errorf("provlog: %d client sessions have calls in progress on server %q; cannot tell which one its %s is for", len(sessions), d.cfg.ID, what)
	}
	return d.inflight[latest], nil
}

// health is a server's entry in provlog__status.
func (d *downstream) health() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := map[string]any{
		"id":       d.cfg.ID,
		"state":    d.state,
		"since":    d.since.UTC().Format(time.RFC3339),
		"restarts": d.restarts,
		"tools":    len(d.tools),
		"inflight": len(d.inflight),
	}
	if len(d.cfg.Command) > 0 {
		h["transport"] = "stdio"
	} else {
		h["transport"] = "http"
	}
	if d.lastErr != "" {
		h["last_error"] = d.lastErr
	}
	if d.cs != nil {
		if r := d.cs.InitializeResult(); r != nil {
			h["protocol_version"] = r.ProtocolVersion
			if r.ServerInfo != nil {
				h["server_info"] = map[string]any{"name": r.ServerInfo.Name, "version": r.ServerInfo.Version}
			}
		}
	}
	if len(d.skipped) > 0 {
		s := map[string]any{}
		for k, v := range d.skipped {
			s[k] = v
		}
		h["skipped_tools"] = s
	}
	if len(d.changes) > 0 {
		h["tool_changes"] = append([]ToolChange(nil), d.changes...)
	}
	if len(d.collisions) > 0 {
		var c []string
		for k := range d.collisions {
			c = append(c, k)
		}
		sort.Strings(c)
		h["name_collisions"] = c
	}
	return h
}

// unchanged reports whether front is registered with this very definition,
// so a re-sync does not re-add it (which would notify every client).
func (d *downstream) unchanged(kind, front string, raw json.RawMessage) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.defs[kind+" "+front] == string(raw)
}
