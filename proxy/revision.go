package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Which protocol revision a downstream server is spoken to in, and what
// the sessionless revision changes for the requests it gets.
//
// # One revision per session, a session per revision
//
// A server behaves by the revision of the session a request comes on, not
// by the client behind it: on a 2026-07-28 session it may no longer send
// sampling, elicitation or roots requests (go-sdk refuses them: "cannot be
// sent while serving a request on protocol version 2026-07-28") and asks
// with input_required results instead (SEP-2322); on a 2025-11-25 session
// it does the opposite, and go-sdk's server turns its own input_required
// results into such requests. A client gets what it would get directly
// only if the server's session speaks the client's revision. So a stdio
// server is spoken to in 2025-11-25 first (askProtocol; its lists,
// subscriptions and every older client's requests go there), and the
// first 2026-07-28 client request that reaches it (tools/call,
// prompts/get, resources/read: the methods that can need input) starts a
// second session to it in the newest revision, in a process of its own,
// which serves those clients from then on (sessionFor). A server that
// answers that with an older revision is not asked again.
//
// An HTTP server is asked for the newest revision, as one session: one that
// serves 2026-07-28 is stateless, and a 2025-11-25 session with a stateless
// server cannot carry its requests to the client at all ("stateless
// servers cannot make requests"). An older client's call on it is bridged
// (bridge.go): the server's input_required result becomes the requests
// the client understands, and their answers go back in the retry.
//
// The other way round, a 2026-07-28 client's call reaches a server on a
// 2025-11-25 session (pinned with protocol, speaking no newer revision, a
// stateful HTTP server), which asks during the call with requests that
// client cannot take: the call is parked (park.go), each request an
// input_required result for the client, its retry's answers the
// request's answer.

// askProtocol is the protocol revision the proxy first asks a downstream
// server for ("": the SDK's newest, falling back to 2025-11-25 when the
// server refuses server/discover). A stdio server is asked for 2025-11-25,
// which also keeps the probe off every legacy server's wire; its newer
// session is started when a newer client needs it.
func (d *downstream) askProtocol() string { return d.cfg.Revision("") }

// Revision returns the protocol revision server c is asked for on the
// session that serves a request of a client of revision protocol ("": the
// SDK's newest, see askProtocol): the pinned one; for an HTTP server the
// newest, its one session serving every client; for a stdio server
// 2025-11-25, or the newest for a 2026-07-28 client, whose requests go to
// the second session (sessionFor). provlog replay dials by it (Dial), so
// that it re-runs a call on the session the call went to.
func (c ServerConfig) Revision(protocol string) string {
	switch {
	case c.Protocol != "":
		return c.Protocol
	case c.URL != "", protocol >= statelessProtocol:
		return ""
	}
	return downstreamProtocolVersion
}

// sessionFor returns the session a request of protocol revision protocol
// goes to: the newer session of a stdio server for a 2026-07-28 client
// (started on first use) while it is up, else the server's one session.
func (d *downstream) sessionFor(ctx context.Context, protocol string) (*mcp.ClientSession, error) {
	cs, err := d.sup.await(ctx, d.cfg.timeout())
	if err != nil || d.cfg.Revision(protocol) == d.askProtocol() || sessionStateless(cs) {
		return cs, err
	}
	sup, ok := d.newer.start(d)
	if !ok {
		return cs, nil // the server speaks no newer revision: what it has
	}
	select {
	case <-sup.firstDone:
	case <-d.gate.closing():
		// d drains (removed or replaced): the newer session's start may
		// wait for the catalogue the drain holds, so the one session
		// serves what was let in before.
		return cs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if newer, err := sup.session(); err == nil {
		return newer, nil
	}
	// It answered with the revision cs has, or is down (a second process
	// may not start where the first holds a lock): the one session serves,
	// as it would without the newer one; provlog__status shows why.
	return cs, nil
}

// A newerSession is a stdio server's session in the newest revision, for
// the clients that speak it, once one has called.
type newerSession struct {
	mu      sync.Mutex
	ctx     context.Context // the server's, set by run
	sup     *supervisor
	done    chan struct{} // closed when sup's run is over
	refused bool          // the server answered with an older revision
}

// setContext notes the context the server runs in; a newer session runs
// in it too.
func (n *newerSession) setContext(ctx context.Context) {
	n.mu.Lock()
	n.ctx = ctx
	n.mu.Unlock()
}

// errNoNewerRevision is why a newer session is not had: the server
// answered the newer ask with the revision its one session speaks. That
// is an answer, not a failure to start.
var errNoNewerRevision = errors.New("no newer revision")

// start returns the newer session's supervisor, starting it on first use,
// and false if there is none to be had.
func (n *newerSession) start(d *downstream) (*supervisor, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.refused || n.ctx == nil || n.ctx.Err() != nil:
		return nil, false
	case n.sup != nil:
		return n.sup, true
	}
	ctx, cancel := context.WithCancel(n.ctx)
	n.sup = newSupervisor(d.cfg.ID, d.p.logger, func(ctx context.Context) (*mcp.ClientSession, *process, error) {
		cs, cmd, err := d.connectAt(ctx, "")
		if err == nil && !sessionStateless(cs) {
			cs.Close()
			endProcess(cmd)
			n.mu.Lock()
			n.refused = true
			n.mu.Unlock()
			cancel() // nothing newer to be had: stop trying
			err = fmt.Errorf("%w: server %q speaks no revision newer than %s", errNoNewerRevision, d.cfg.ID, cs.InitializeResult().ProtocolVersion)
		}
		return cs, cmd, err
	}, func(ctx context.Context, cs *mcp.ClientSession) {
		d.cat.syncNewer(ctx, cs)
		d.p.resubscribe(ctx, d, cs)
	}, func(text string) string { return d.logText(text, nil) })
	n.done = make(chan struct{})
	d.p.logger.Info("proxy: a 2026-07-28 client called a stdio server; starting its session in that revision", "server", d.cfg.ID)
	go func(sup *supervisor, done chan struct{}) {
		defer close(done)
		defer cancel()
		sup.run(ctx)
	}(n.sup, n.done)
	return n.sup, true
}

// current returns the newer session if it is up, else nil.
func (n *newerSession) current() *mcp.ClientSession {
	n.mu.Lock()
	sup := n.sup
	n.mu.Unlock()
	if sup == nil {
		return nil
	}
	return sup.current()
}

// stop closes the newer session, if there is one.
func (n *newerSession) stop() {
	n.mu.Lock()
	sup := n.sup
	n.mu.Unlock()
	if sup != nil {
		sup.stop()
	}
}

// report adds the newer session's state to a server's health entry.
func (n *newerSession) report(h map[string]any) {
	n.mu.Lock()
	sup, refused := n.sup, n.refused
	n.mu.Unlock()
	if sup == nil || refused {
		return
	}
	st := sup.status()
	m := map[string]any{"state": st.state, "since": st.since.UTC().Format(time.RFC3339), "restarts": st.restarts}
	if st.lastErr != "" {
		m["last_error"] = st.lastErr
	}
	if st.init != nil {
		m["protocol_version"] = st.init.ProtocolVersion
	}
	h["newer_session"] = m
}

// wait waits for the newer session's supervisor to end, once the server's
// context is done.
func (n *newerSession) wait() {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done != nil {
		<-done
	}
}

// stateless reports whether d's session speaks the sessionless
// 2026-07-28 revision.
func (d *downstream) stateless() bool {
	cs, err := d.session()
	return err == nil && sessionStateless(cs)
}

// sessionStateless reports whether cs speaks the sessionless 2026-07-28
// revision. Calls on such a session go through the SDK's client, which
// writes that revision's per-request envelope.
func sessionStateless(cs *mcp.ClientSession) bool {
	ir := cs.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= statelessProtocol
}

// downMeta is the _meta a request of a front client carries on to its
// server (forwardMeta), with the client's own per-request capabilities
// and log level (2026-07-28) where it sent them, so the server judges
// what the client can do, not what the proxy can, and logs what the
// client asked for. A server on a 2025-11-25 session reads them too where
// it knows them (go-sdk's ClientCapabilities prefers them to the
// session's), else ignores them; to a stateless server the SDK adds the
// proxy's capabilities only when the client sent none.
func downMeta(m mcp.Meta) mcp.Meta {
	out := forwardMeta(m)
	for _, k := range []string{mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
