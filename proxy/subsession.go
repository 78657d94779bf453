package proxy

import (
	"context"
	"math"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Which front session holds which resource subscription. p.subs counts a
// URI's subscribers, and the downstream subscription goes with the last of
// them; so a session counts once per URI, however often it subscribes
// (go-sdk's server calls the handler for each resources/subscribe, and a
// subscriptions/listen subscribes each URI it names, repeats too), an
// unsubscribe counts only from a session that holds the URI, and a session
// that ends gives up what it held. Counted per request, a client
// unsubscribing from a URI it never subscribed to ended another client's
// subscription downstream (that client heard of no change again), and a
// session that ended subscribed held its URIs downstream for good.

// sessionSubs are the URIs a front session is subscribed to, and the
// session's actor.
type sessionSubs struct {
	actor string
	uris  map[string]bool
}

// takeSub notes that ss, a session of actor, subscribes to uri (p.mu
// held), and reports whether it held uri not yet: only then does p.subs
// count it. A URI ss does not hold is refused beyond the caps
// (Options.SubscriptionsPerSession, the actor's share, MaxSubscriptions).
func (p *Proxy) takeSub(ss *mcp.ServerSession, actor, uri string) (bool, error) {
	if ss != nil {
		held := p.subsBy[ss]
		if held != nil && held.uris[uri] {
			return false, nil
		}
		if err := p.subsFull(held, actor, 1); err != nil {
			return false, err
		}
		if held == nil {
			held = &sessionSubs{actor: actor, uris: map[string]bool{}}
			p.subsBy[ss] = held
			go p.dropSubsAtEnd(ss)
		}
		held.uris[uri] = true
		p.subsOf.take(held.actor, math.MaxInt) // subsFull saw room
		p.nsubs++
	}
	p.subs[uri]++
	return true, nil
}

// subsFull returns why a session that holds held (nil: nothing yet), of
// actor, may not subscribe to n more URIs, or nil (p.mu held).
func (p *Proxy) subsFull(held *sessionSubs, actor string, n int) error {
	o, has := &p.opts, 0
	if held != nil {
		has = len(held.uris)
	}
	switch {
	case has+n > o.SubscriptionsPerSession:
		return rpcError(jsonrpc.CodeInvalidRequest, "provlog: the session would hold %d resource subscriptions, over the sidecar's subscriptions.per_session (%d); unsubscribe from some, or listen for fewer, first (nothing was subscribed)",
			has+n, o.SubscriptionsPerSession)
	case p.subsOf[actor]+n > o.SubscriptionsPerActor:
		return rpcError(jsonrpc.CodeInvalidRequest, "provlog: actor %q would hold %d resource subscriptions, over its share (the sidecar's subscriptions.per_actor %d of subscriptions.max %d); unsubscribe, or end sessions that hold some, first (nothing was subscribed)",
			truncate(actor, 64), p.subsOf[actor]+n, o.SubscriptionsPerActor, o.MaxSubscriptions)
	case p.nsubs+n > o.MaxSubscriptions:
		return rpcError(jsonrpc.CodeInvalidRequest, "provlog: the sessions would hold %d resource subscriptions, over the sidecar's subscriptions.max (%d); unsubscribe from some first (nothing was subscribed)",
			p.nsubs+n, o.MaxSubscriptions)
	}
	return nil
}

// listenFits refuses a subscriptions/listen whose resource URIs do not
// fit within the caps together, before any is subscribed: the SDK
// subscribes them one at a time, and one beyond the caps would end the
// listen with those before it subscribed downstream and released again.
func (p *Proxy) listenFits(req mcp.Request) error {
	lr, ok := req.(*mcp.SubscriptionsListenRequest)
	if !ok || lr.Params == nil || lr.Params.Notifications == nil || len(lr.Params.Notifications.ResourceSubscriptions) == 0 {
		return nil
	}
	actor := ""
	if lr.Session != nil {
		actor, _ = p.sessionActor(lr.Session)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.subsBy[lr.Session]
	more := map[string]bool{}
	for _, u := range lr.Params.Notifications.ResourceSubscriptions {
		if held == nil || !held.uris[u] {
			more[u] = true
		}
	}
	return p.subsFull(held, actor, len(more))
}

// dropSub notes that ss no longer holds uri (p.mu held), and reports
// whether it was the last front session to hold it. One that did not hold
// it changes nothing.
func (p *Proxy) dropSub(ss *mcp.ServerSession, uri string) (last bool) {
	if ss != nil {
		held := p.subsBy[ss]
		if held == nil || !held.uris[uri] {
			return false
		}
		delete(held.uris, uri)
		p.subsOf.put(held.actor)
		p.nsubs--
	}
	if p.subs[uri]--; p.subs[uri] > 0 {
		return false
	}
	delete(p.subs, uri)
	return true
}

// dropSubsAtEnd gives up, once ss has ended, the subscriptions it held,
// and the downstream ones no front session holds any more.
func (p *Proxy) dropSubsAtEnd(ss *mcp.ServerSession) {
	ss.Wait()
	p.mu.Lock()
	var last []string
	var held map[string]bool
	if h := p.subsBy[ss]; h != nil {
		held = h.uris
	}
	for uri := range held {
		if p.dropSub(ss, uri) {
			last = append(last, uri)
		}
	}
	delete(p.subsBy, ss)
	p.mu.Unlock()
	if p.ctx.Err() != nil {
		return // the proxy is closing: its downstream sessions end with it
	}
	for _, u := range last {
		d, uri, ok := p.router.resource(u)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(p.ctx, d.cfg.timeout())
		if err := d.release(ctx, uri); err != nil {
			shown, why := d.loggedURI(uri, err)
			p.logger.Warn("proxy: ending a subscription of a closed session failed", "server", d.cfg.ID, "uri", shown, "error", why)
		}
		cancel()
	}
}
