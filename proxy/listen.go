package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
// acknowledged it (notifications/subscriptions/acknowledged, noteListenAcks),
// the acknowledgement naming the listen's request id (acknowledged).
//
// A listen, once held, is held for the session's life (renewed if the
// server ends it: Renewal, below), whatever the clients unsubscribe (the
// front tells only the clients subscribed): a go-sdk server's
// subscription is its session's, not its listen's, so a cancelled
// listen's end can remove a listen for the same URI sent after it, and
// over stdio the session is one.

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
	actor := p.subscriber(req)
	p.mu.Lock()
	taken, err := p.takeSub(req.Session, actor, req.Params.URI)
	first := taken && p.subs[req.Params.URI] == 1
	p.mu.Unlock()
	if err != nil {
		return err
	}
	cs, err := d.session()
	if err != nil {
		return nil // resubscribed when the server is back
	}
	// Another client's subscription on a 2026-07-28 session is held anew
	// too: a listen the server ended and the proxy gave up renewing
	// (renew) is asked of it again, as a client going direct would
	// listen again; one held answers at once.
	if !first && !sessionStateless(cs) {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, d.cfg.timeout())
	defer cancel()
	if err := d.hold(hctx, cs, uri); errors.Is(err, errSessionEnded) {
		return nil // counted before cs was had: its successor's resubscribe holds it
	} else if err != nil {
		p.mu.Lock()
		// Gone at none, or the URI would be renewed (subscribed).
		if taken {
			p.dropSub(req.Session, req.Params.URI)
		}
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

// subscriber is the actor of a resources/subscribe: its token's, or (for
// a URI of a subscriptions/listen, which the SDK subscribes without the
// request's token) its session's.
func (p *Proxy) subscriber(req *mcp.SubscribeRequest) string {
	if ex := req.Extra; ex != nil && ex.TokenInfo != nil && ex.TokenInfo.UserID != "" {
		return ex.TokenInfo.UserID
	}
	if req.Session == nil {
		return ""
	}
	a, _ := p.sessionActor(req.Session)
	return a
}

func (p *Proxy) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	d, uri, ok := p.router.resource(req.Params.URI)
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	p.mu.Lock()
	last := p.dropSub(req.Session, req.Params.URI)
	p.mu.Unlock()
	if !last {
		return nil
	}
	return d.release(ctx, uri)
}

// release ends the downstream subscription to uri (d's name for it) that
// no front client holds any more. A session of the 2026-07-28 revision
// keeps its listen (listen.go).
func (d *downstream) release(ctx context.Context, uri string) error {
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

	// For tests of renewal (renew): testingOnlyBackoff, if not zero,
	// replaces renewalBackoff; testingOnlyLive counts the runs not
	// returned, testingOnlyWaits the backoffs they began to wait out,
	// and testingOnlyHolds the listens they went to hold.
	testingOnlyBackoff                                  atomic.Int64
	testingOnlyLive, testingOnlyWaits, testingOnlyHolds atomic.Int64
}

// A listen is one URI's subscription on one session.
type listen struct {
	done chan struct{} // closed once the server acknowledged or refused it
	err  error         // the server's refusal, set before done is closed
	// acked is when the server acknowledged it (zero before), and
	// renewal its place in a run of renewals (renew; 0: a client's).
	acked   time.Time
	renewal int
	// id is the listen's request id, once it is sent (listens.sent).
	id jsonrpc.ID
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
	return d.listens.hold(ctx, cs, uri, 0)
}

// hold holds uri on cs as d.hold does; a listen it sends is the renewal-th
// of a run (renew).
func (l *listens) hold(ctx context.Context, cs *mcp.ClientSession, uri string, renewal int) error {
	l.mu.Lock()
	uris, known := l.on[cs]
	if !known && renewal > 0 {
		// The session ended since the listen renewed was sent (its
		// listens go with it): a listen sent on it now would be go-sdk's
		// to keep, for nothing.
		l.mu.Unlock()
		return errSessionEnded
	}
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
		li = &listen{done: make(chan struct{}), renewal: renewal}
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

// sent notes the request id of the listen for uris that go-sdk is about
// to send on cs: that of the listen l holds for each (hold sends one only
// for a URI without one).
func (l *listens) sent(cs *mcp.ClientSession, id jsonrpc.ID, uris []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range uris {
		if li, ok := l.on[cs][u]; ok {
			li.id = id
		}
	}
}

// acknowledged notes that the server took the listen of cs that a names
// (SEP-2575: _meta's io.modelcontextprotocol/subscriptionId, the listen's
// request id), for the URIs it lists. An acknowledgement naming another
// listen than the one held for a URI takes none: one of a listen already
// ended (a server's or a go-between's late or replayed message) would
// otherwise mark a renewal, or a new subscriber's listen, held before the
// server took it, and the client would be told it subscribed to what the
// server may yet refuse.
func (l *listens) acknowledged(cs *mcp.ClientSession, a *mcp.SubscriptionsAcknowledgedParams) {
	// One that names no listen (a server of an earlier draft; the
	// revision requires the id) or none readable is taken for the listen
	// of each URI it lists, as the URIs are all it says: left waiting,
	// such a server's every subscription would fail at its timeout, though
	// a client going direct (go-sdk's ignores acknowledgements) gets them.
	id, _ := jsonrpc.MakeID(a.Meta[mcp.MetaKeySubscriptionID])
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range a.Notifications.ResourceSubscriptions {
		li, ok := l.on[cs][u]
		if ok && li.acked.IsZero() && (!id.IsValid() || li.id == id) {
			li.acked = time.Now()
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
// does). It returns those of them it had acknowledged, by URI.
func (l *listens) refused(cs *mcp.ClientSession, uris []string, err error) map[string]*listen {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ended map[string]*listen
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
		if !li.acked.IsZero() {
			if ended == nil {
				ended = map[string]*listen{}
			}
			ended[u] = li
		}
		li.end(err)
	}
	return ended
}

// Renewal. A server may end a listen it acknowledged: over HTTP its
// stream closes (it restarted it, a proxy between dropped it, its own
// timeout), over stdio it answers the listen. Going direct, the client
// would see its listen end and could listen anew; through provlog the
// listen is the proxy's, and the clients still subscribed would silently
// hear nothing more. So the proxy listens anew on the same session: at
// once the first time (a change told before the server took the new
// listen goes unheard, as it would for a client listening anew), then
// after a delay doubled each time. A run of renewals whose listens do not
// last steadyListen stops after maxRenewals: a server that ends every
// listen at once is sent that many more, not one per end.
//
// A stream that carried an event id is not ended here (sseTee): go-sdk
// resumes it with a GET and Last-Event-ID, and if that fails it fails the
// session, whose successor is given the subscriptions (resubscribe).
//
// When the run stops, the operator is warned and the clients are told
// nothing: no message of MCP ends one client's subscription (a
// resources/updated would claim a change), and go-sdk's front server
// gives no hold on a client's listen to end it. A client's next
// subscription to the URI asks the server anew (subscribe).
const (
	maxRenewals    = 5
	renewalBackoff = 250 * time.Millisecond // before a run's second renewal
	steadyListen   = time.Minute
)

// watchListens returns the hooks that tell d's listens of those sent on
// the session that session holds once it is connected (none is sent
// before), and of their ends.
func (d *downstream) watchListens(session *atomic.Pointer[mcp.ClientSession]) listenHooks {
	return listenHooks{
		sent: func(id jsonrpc.ID, uris []string) {
			if cs := session.Load(); cs != nil {
				d.listens.sent(cs, id, uris)
			}
		},
		refused: func(uris []string, err error) {
			if cs := session.Load(); cs != nil {
				d.listenEnded(cs, uris, err)
			}
		},
	}
}

// listenEnded notes that the server refused or ended cs's listen for
// uris (pendingCalls.refused), and renews those it had acknowledged.
// It runs on the reader of the listen's stream, so it does not wait.
func (d *downstream) listenEnded(cs *mcp.ClientSession, uris []string, err error) {
	for uri, li := range d.listens.refused(cs, uris, err) {
		n := li.renewal + 1
		if time.Since(li.acked) >= steadyListen {
			n = 1
		}
		go d.renew(cs, uri, n, err)
	}
}

// renew holds uri on cs anew, as the n-th renewal of a run and those
// after it while they fail, as long as front clients hold its
// subscription; why is the last listen's end.
func (d *downstream) renew(cs *mcp.ClientSession, uri string, n int, why error) {
	d.listens.testingOnlyLive.Add(1)
	defer d.listens.testingOnlyLive.Add(-1)
	backoff := renewalBackoff
	if b := d.listens.testingOnlyBackoff.Load(); b > 0 {
		backoff = time.Duration(b)
	}
	for ; n <= maxRenewals; n++ {
		if n > 1 {
			d.listens.testingOnlyWaits.Add(1)
			select {
			case <-time.After(backoff << (n - 2)):
			case <-d.p.ctx.Done(): // the proxy closed: nothing to renew
				return
			}
		}
		if !d.p.subscribed(d, uri) {
			return
		}
		d.listens.testingOnlyHolds.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.timeout())
		err := d.listens.hold(ctx, cs, uri, n)
		cancel()
		// Held: should the server end it too, listenEnded goes on with
		// the run. Or the session ended: its successor's resubscribe
		// holds the subscription.
		if err == nil || errors.Is(err, mcp.ErrConnectionClosed) {
			return
		}
		why = err
	}
	shown, reason := d.loggedURI(uri, why)
	d.p.logger.Warn("proxy: the server keeps ending a resource subscription; no longer renewed", "server", d.cfg.ID, "uri", shown, "renewals", maxRenewals, "error", reason)
}

// subscribed reports whether a front client holds a subscription to uri
// of d.
func (p *Proxy) subscribed(d *downstream, uri string) bool {
	p.mu.Lock()
	held := make([]string, 0, len(p.subs))
	for u := range p.subs {
		held = append(held, u)
	}
	p.mu.Unlock()
	for _, u := range held {
		if owner, du, ok := p.router.resource(u); ok && owner == d && du == uri {
			return true
		}
	}
	return false
}
