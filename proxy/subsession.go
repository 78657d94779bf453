package proxy

import (
	"context"

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

// takeSub notes that ss subscribes to uri (p.mu held), and reports
// whether it held uri not yet: only then does p.subs count it.
func (p *Proxy) takeSub(ss *mcp.ServerSession, uri string) bool {
	if ss != nil {
		held := p.subsBy[ss]
		if held[uri] {
			return false
		}
		if held == nil {
			held = map[string]bool{}
			p.subsBy[ss] = held
			go p.dropSubsAtEnd(ss)
		}
		held[uri] = true
	}
	p.subs[uri]++
	return true
}

// dropSub notes that ss no longer holds uri (p.mu held), and reports
// whether it was the last front session to hold it. One that did not hold
// it changes nothing.
func (p *Proxy) dropSub(ss *mcp.ServerSession, uri string) (last bool) {
	if ss != nil {
		if !p.subsBy[ss][uri] {
			return false
		}
		delete(p.subsBy[ss], uri)
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
	for uri := range p.subsBy[ss] {
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
