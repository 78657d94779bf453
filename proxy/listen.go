package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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

// listens are the subscriptions held on one session of a downstream, the
// one of the 2026-07-28 revision it has up (a stdio server's newer
// session, or its one session, HTTP or pinned to that revision).
type listens struct {
	mu    sync.Mutex
	on    *mcp.ClientSession
	acked map[string]chan struct{} // by URI, closed once the server acknowledged it
}

// errNoSubscriptions is a subscription to a server that offers none: a
// 2026-07-28 server would not acknowledge it.
var errNoSubscriptions = errors.New("the server offers no resource subscriptions")

// hold holds a subscription to uri on cs, a session of d, and returns
// once the server has taken it.
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
	if l.on != cs {
		l.on, l.acked = cs, map[string]chan struct{}{}
	}
	acked, held := l.acked[uri]
	if !held {
		acked = make(chan struct{})
		l.acked[uri] = acked
	}
	l.mu.Unlock()
	if !held {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			l.mu.Lock()
			if l.on == cs {
				delete(l.acked, uri)
			}
			l.mu.Unlock()
			return err
		}
	}
	select {
	case <-acked:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the server to acknowledge the subscription: %w", ctx.Err())
	}
}

// acknowledged notes that the server took cs's listens for uris.
func (l *listens) acknowledged(cs *mcp.ClientSession, uris []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on != cs {
		return
	}
	for _, u := range uris {
		if acked, ok := l.acked[u]; ok {
			select {
			case <-acked:
			default:
				close(acked)
			}
		}
	}
}
