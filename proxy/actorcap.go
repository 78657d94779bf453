package proxy

import (
	"math"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Each actor's share of the front's caps. A cap shared by all actors is
// one actor's to take: a hostile probe opened sessions.max idle sessions
// with one token, and every other actor's initialize got 503 until the
// idle limit closed them; parked calls were the same. So each actor may
// hold at most its share of the stateful sessions (Options.SessionsPerActor),
// of the parked calls (Options.ParkedPerActor) and of the resource
// subscriptions (Options.SubscriptionsPerActor; a session holds at most
// Options.SubscriptionsPerSession of them). The default share is a
// quarter of the cap: one actor cannot lock the others out, and an
// operator with a single busy actor raises it to the cap. Nothing is
// counted per call: sessions are counted when they open and end, parked
// calls and subscriptions under the lock their tables already take.

// Default caps on resource subscriptions when [Options] leave them zero.
// Each URI subscribed is a subscription at its server (on a 2026-07-28
// server a listen stream of its own) and an entry per front session
// holding it; clients subscribe to the few resources they show, so 1,000
// per session is far beyond ordinary use, and 10,000 in all keeps the
// downstream streams in the tens of megabytes.
const (
	DefaultMaxSubscriptions        = 10_000
	DefaultSubscriptionsPerSession = 1_000
)

// share is the default share of a cap of n: a quarter, at least 1.
func share(n int) int { return max(1, n/4) }

// shareCaps sets the caps on parked calls and subscriptions, and each
// actor's share of the caps, that o leaves zero to their defaults, and
// holds each share within its cap (o.MaxSessions is set already).
func (o *Options) shareCaps() {
	if o.MaxParkedCalls <= 0 {
		o.MaxParkedCalls = DefaultMaxParkedCalls
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.SubscriptionsPerSession <= 0 {
		o.SubscriptionsPerSession = DefaultSubscriptionsPerSession
	}
	for _, c := range []struct {
		share *int
		of    int
	}{
		{&o.SessionsPerActor, o.MaxSessions}, {&o.ParkedPerActor, o.MaxParkedCalls},
		{&o.SubscriptionsPerActor, o.MaxSubscriptions}, {&o.SubscriptionsPerSession, o.MaxSubscriptions},
	} {
		if *c.share <= 0 {
			*c.share = share(c.of)
		}
		*c.share = min(*c.share, c.of)
	}
}

// shares counts what each actor holds of a capped resource, under its
// owner's lock.
type shares map[string]int

// take counts one more for actor if it holds fewer than limit, and
// reports whether it did.
func (s shares) take(actor string, limit int) bool {
	if s[actor] >= limit {
		return false
	}
	s[actor]++
	return true
}

// put counts one less for actor.
func (s shares) put(actor string) {
	if s[actor]--; s[actor] <= 0 {
		delete(s, actor)
	}
}

// admitSession decides whether r, a request of the stateful handler, may
// go on: one that would open a session (a POST without a session id) is
// refused with 503 when the front holds Options.MaxSessions sessions or its
// actor its share of them; otherwise it holds a place among its actor's
// sessions until release is called, when r has been served (the session it
// opened, if any, is counted by countSession meanwhile), so that
// initializes made at once cannot pass the share together.
func (p *Proxy) admitSession(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return func() {}, true
	}
	if p.sessionsFull(r) {
		writeHTTPError(w, http.StatusServiceUnavailable, rpcError(jsonrpc.CodeInternalError,
			"provlog: too many sessions (the sidecar's sessions.max %d); close one (DELETE), or wait until one is closed after sessions.idle (%s) without a request",
			p.opts.MaxSessions, p.opts.SessionIdle))
		return nil, false
	}
	var actor string
	if id := identityOf(r.Context()); id != nil {
		actor = id.Actor
	}
	p.sessionsMu.Lock()
	ok = p.sessionShares.take(actor, p.opts.SessionsPerActor)
	p.sessionsMu.Unlock()
	if !ok {
		writeHTTPError(w, http.StatusServiceUnavailable, rpcError(jsonrpc.CodeInternalError,
			"provlog: too many sessions for actor %q (its share, the sidecar's sessions.per_actor %d of sessions.max %d); close one of its sessions (DELETE), or wait until one is closed after sessions.idle (%s) without a request",
			truncate(actor, 64), p.opts.SessionsPerActor, p.opts.MaxSessions, p.opts.SessionIdle))
		return nil, false
	}
	return func() { p.putSession(actor) }, true
}

func (p *Proxy) putSession(actor string) {
	p.sessionsMu.Lock()
	p.sessionShares.put(actor)
	p.sessionsMu.Unlock()
}

// countSession counts ss, a stateful HTTP session an initialize request of
// actor opened, among actor's sessions until it ends (once, however many
// initialize requests it gets).
func (p *Proxy) countSession(ss *mcp.ServerSession, actor string) {
	if _, counted := p.sessionActors.LoadOrStore(ss, actor); counted {
		return
	}
	p.sessionsMu.Lock()
	p.sessionShares.take(actor, math.MaxInt) // admitSession held its place
	p.sessionsMu.Unlock()
	go func() {
		ss.Wait()
		p.putSession(actor)
		p.sessionActors.Delete(ss)
	}()
}
