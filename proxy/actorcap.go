package proxy

import (
	"math"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
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
			*c.share = max(1, c.of/4) // the default: a quarter of the cap, at least 1
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
// sessions until release is called, when r has been served, so that
// initializes made at once cannot pass the share together. The session r
// opens, if any, takes that place over (countSession): the handler may
// return after its client has the answer and has asked for the next
// session, and a session counted beside its request's place was counted
// twice meanwhile (an actor one short of its share was refused).
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
	place := placeOf(auth.TokenInfoFromContext(r.Context()))
	p.sessionsMu.Lock()
	ok = p.sessionShares.take(actor, p.opts.SessionsPerActor)
	place.held = ok
	p.sessionsMu.Unlock()
	if !ok {
		writeHTTPError(w, http.StatusServiceUnavailable, rpcError(jsonrpc.CodeInternalError,
			"provlog: too many sessions for actor %q (its share, the sidecar's sessions.per_actor %d of sessions.max %d); close one of its sessions (DELETE), or wait until one is closed after sessions.idle (%s) without a request",
			truncate(actor, 64), p.opts.SessionsPerActor, p.opts.MaxSessions, p.opts.SessionIdle))
		return nil, false
	}
	return func() {
		p.sessionsMu.Lock()
		if place.held { // no session took it
			place.held = false
			p.sessionShares.put(actor)
		}
		p.sessionsMu.Unlock()
	}, true
}

func (p *Proxy) putSession(actor string) {
	p.sessionsMu.Lock()
	p.sessionShares.put(actor)
	p.sessionsMu.Unlock()
}

// A sessionPlace is the place admitSession holds among its actor's
// sessions for one request, which a session the request opens takes
// over. It rides the request's auth.TokenInfo (placeExtra), which
// HTTPHandler's verify makes anew for each request and the SDK hands to
// the initialize handler. Its field is guarded by Proxy.sessionsMu.
type sessionPlace struct {
	held bool // counted in sessionShares for the request, not yet released or taken over
}

// placeExtra is the key of a request's sessionPlace in its
// auth.TokenInfo's Extra.
const placeExtra = "dev.provlog/session-place"

// placeOf returns the sessionPlace info carries, or a new one that no
// session can take over (a request without one).
func placeOf(info *auth.TokenInfo) *sessionPlace {
	if info != nil {
		if pl, ok := info.Extra[placeExtra].(*sessionPlace); ok {
			return pl
		}
	}
	return new(sessionPlace)
}

// countSession counts ss, a stateful HTTP session an initialize request of
// actor opened, among actor's sessions until it ends (once, however many
// initialize requests it gets), in the place its request held (info's).
func (p *Proxy) countSession(ss *mcp.ServerSession, actor string, info *auth.TokenInfo) {
	if _, counted := p.sessionActors.LoadOrStore(ss, actor); counted {
		return
	}
	place := placeOf(info)
	p.sessionsMu.Lock()
	if place.held {
		place.held = false // the session's now, put back when it ends
	} else {
		p.sessionShares.take(actor, math.MaxInt) // admitted: counted whatever the share
	}
	p.sessionsMu.Unlock()
	go func() {
		ss.Wait()
		p.putSession(actor)
		p.sessionActors.Delete(ss)
	}()
}
