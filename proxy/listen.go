package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions: the front's, forwarded once per URI
// (subscribe), and those held on the downstream sessions.
//
// Resource subscriptions on a session of the 2026-07-28 revision: a stdio
// server's newer session (revision.go) or an HTTP server's one session.
// Such a subscription is a subscriptions/listen stream per URI (SEP-2575),
// which go-sdk's Subscribe opens and returns from once it has sent it;
// the server takes requests concurrently, so a change told before it took
// the listen went unheard. A subscription is held once the server
// acknowledged it (notifications/subscriptions/acknowledged, noteListenAcks).
//
// A listen, once held, is held for the session's life, whatever the
// clients unsubscribe (the front tells only the clients subscribed): a
// go-sdk server's subscription is its session's, not its listen's, so a
// cancelled listen's end can remove a listen for the same URI sent after
// it, and over stdio the session is one.

// A listen the server refuses (a JSON-RPC error for it, or over HTTP an
// error status, or a stream ended unanswered) is never acknowledged, and
// go-sdk does not wait for its answer: the refusal is read off the wire
// instead (pendingCalls.refused, capture.go), so the client is told the
// server's error at once, and the URI is asked of the server anew by the
// next subscription.

// subscribe forwards a resource subscription; the downstream server sees
// one subscription per URI however many clients hold one.
func (p *Proxy) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	d, uri, ok := p.router.resource(req.Params.URI)
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	p.mu.Lock()
	p.subs[req.Params.URI]++
	first := p.subs[req.Params.URI] == 1
	p.mu.Unlock()
	if !first {
		return nil
	}
	cs, err := d.session()
	if err != nil {
		return nil // resubscribed when the server is back
	}
	hctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	if err := d.hold(hctx, cs, uri); errors.Is(err, errSessionEnded) {
		return nil // counted before cs was had: its successor's resubscribe holds it
	} else if err != nil {
		p.mu.Lock()
		p.subs[req.Params.URI]--
		p.mu.Unlock()
		return forwardError(d.cfg.ID, err)
	}
	if ncs := d.newer.current(); ncs != nil {
		// The second process serves the 2026-07-28 clients' calls and
		// reads: what changes there is told there.
		if err := d.hold(hctx, ncs, uri); err != nil {
			shown, why := d.loggedURI(uri, err)
			p.logger.Warn("proxy: subscribing on the newer session failed", "server", d.cfg.ID, "uri", shown, "error", why)
		}
	}
	return nil
}

func (p *Proxy) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	d, uri, ok := p.router.resource(req.Params.URI)
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	p.mu.Lock()
	last := p.subs[req.Params.URI] == 1
	if p.subs[req.Params.URI] > 0 {
		p.subs[req.Params.URI]--
	}
	if p.subs[req.Params.URI] == 0 {
		delete(p.subs, req.Params.URI)
	}
	p.mu.Unlock()
	if !last {
		return nil
	}
	// A session of the 2026-07-28 revision keeps its listen (listen.go).
	if cs, err := d.session(); err == nil && !sessionStateless(cs) {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			return forwardError(d.cfg.ID, err)
		}
	}
	return nil
}

// resubscribe renews the subscriptions held on d after it (or its newer
// session) connected.
func (p *Proxy) resubscribe(ctx context.Context, d *downstream, cs *mcp.ClientSession) {
	caps := cs.InitializeResult().Capabilities
	if caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		return
	}
	p.mu.Lock()
	var uris []string
	for u := range p.subs {
		uris = append(uris, u)
	}
	p.mu.Unlock()
	for _, u := range uris {
		if owner, uri, ok := p.router.resource(u); ok && owner == d {
			sctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
			err := d.hold(sctx, cs, uri)
			cancel()
			if err != nil {
				shown, why := d.loggedURI(uri, err)
				p.logger.Warn("proxy: renewing a resource subscription failed", "server", d.cfg.ID, "uri", shown, "error", why)
			}
		}
	}
}

// listens are the subscriptions held on the sessions of the 2026-07-28
// revision of a downstream (a stdio server's newer session, or its one
// session, HTTP or pinned to that revision): each session's own, as a
// reconnect has an old session and its successor up at once.
type listens struct {
	mu sync.Mutex
	on map[*mcp.ClientSession]map[string]*listen // by session, then URI
}

// A listen is one URI's subscription on one session.
type listen struct {
	done chan struct{} // closed once the server acknowledged or refused it
	err  error         // the server's refusal, set before done is closed
}

// errSessionEnded is a subscription whose session ended before the
// server acknowledged it: the session that replaces it is given it
// (resubscribe).
var errSessionEnded = fmt.Errorf("%w: the session ended before the server acknowledged the subscription", mcp.ErrConnectionClosed)

// errNoSubscriptions is a subscription to a server that offers none: a
// 2026-07-28 server would not acknowledge it.
var errNoSubscriptions = errors.New("the server offers no resource subscriptions")

// hold holds a subscription to uri on cs, a session of d, and returns
// once the server has taken it, or with its refusal.
func (d *downstream) hold(ctx context.Context, cs *mcp.ClientSession, uri string) error {
	if !sessionStateless(cs) {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		return errNoSubscriptions
	}
	return d.listens.hold(ctx, cs, uri)
}

func (l *listens) hold(ctx context.Context, cs *mcp.ClientSession, uri string) error {
	l.mu.Lock()
	uris, known := l.on[cs]
	if !known {
		if l.on == nil {
			l.on = map[*mcp.ClientSession]map[string]*listen{}
		}
		uris = map[string]*listen{}
		l.on[cs] = uris
		go func() {
			cs.Wait()
			l.mu.Lock()
			for _, li := range l.on[cs] {
				li.end(errSessionEnded)
			}
			delete(l.on, cs)
			l.mu.Unlock()
		}()
	}
	li, held := uris[uri]
	if !held {
		li = &listen{done: make(chan struct{})}
		uris[uri] = li
	}
	l.mu.Unlock()
	if !held {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			l.mu.Lock()
			if l.on[cs][uri] == li {
				delete(l.on[cs], uri)
			}
			l.mu.Unlock()
			return err
		}
	}
	select {
	case <-li.done:
		return li.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the server to acknowledge the subscription: %w", ctx.Err())
	}
}

// acknowledged notes that the server took cs's listens for uris.
func (l *listens) acknowledged(cs *mcp.ClientSession, uris []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range uris {
		if li, ok := l.on[cs][u]; ok {
			li.end(nil)
		}
	}
}

// end ends the wait for li with err (nil: held), unless it is over.
func (li *listen) end(err error) {
	select {
	case <-li.done:
	default:
		li.err = err
		close(li.done)
	}
}

// refused notes that the server refused cs's listen for uris, or ended
// it, as err says: it holds none of them (having taken them, it no longer
// does).
func (l *listens) refused(cs *mcp.ClientSession, uris []string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range uris {
		li, ok := l.on[cs][u]
		if !ok {
			continue
		}
		// go-sdk keeps the URI for subscribed until told otherwise, and
		// would send no listen for the next subscription; told under
		// l.mu, before that subscription can ask it.
		_ = cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: u})
		delete(l.on[cs], u)
		li.end(err)
	}
}
