package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Draining a removed server (RemoveServer): its names leave the front at
// once, requests already let in (calls, reads, prompts) go on to their end
// for up to Options.DrainTimeout, and then the ones still under way are
// cancelled, so they end as a client's cancellation does. Either way each
// goes through its one lifecycle to the end: a call's outcome is recorded
// before the server is stopped. A request that comes for the server once
// it is removed is refused, saying so, before anything is written or
// forwarded. Servers removed in one change (RemoveServers, as a reload
// does) drain side by side under the one bound (drainAll).

// DefaultDrainTimeout bounds how long RemoveServer lets a removed
// server's calls in flight run when Options.DrainTimeout is zero.
const DefaultDrainTimeout = 30 * time.Second

// A gate counts the requests let in to one server and, once it is closed,
// lets no more in.
type gate struct {
	mu      sync.Mutex
	closed  bool
	expired bool // the drain's bound passed: what was in flight was cancelled
	next    uint64
	open    map[uint64]context.CancelFunc // in flight -> cancels its forwarding (nil before it forwards)
	idle    chan struct{}                 // closed when the gate is closed and nothing is in flight
}

// enter lets a request in and returns its ticket, or reports false if the
// server was removed.
func (g *gate) enter() (uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, false
	}
	if g.open == nil {
		g.open = map[uint64]context.CancelFunc{}
	}
	g.next++
	g.open[g.next] = nil
	return g.next, true
}

// forwarding notes what cancels ticket t's request to the server; if the
// drain's bound has passed already, it is cancelled at once.
func (g *gate) forwarding(t uint64, cancel context.CancelFunc) {
	g.mu.Lock()
	expired := g.expired
	if _, ok := g.open[t]; ok && !expired {
		g.open[t] = cancel
	}
	g.mu.Unlock()
	if expired {
		cancel()
	}
}

// leave ends ticket t.
func (g *gate) leave(t uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.open, t)
	if g.closed && len(g.open) == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// close lets no more requests in and returns a channel closed once none
// is in flight.
func (g *gate) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	idle := make(chan struct{})
	if len(g.open) == 0 {
		close(idle)
	} else {
		g.idle = idle
	}
	return idle
}

// expire marks the drain's bound passed and returns what cancels the
// requests still in flight, and how many there are. The caller cancels
// them once every gate of the drain is marked (drainAll).
func (g *gate) expire() ([]context.CancelFunc, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expired = true
	var cancels []context.CancelFunc
	for _, c := range g.open {
		if c != nil {
			cancels = append(cancels, c)
		}
	}
	return cancels, len(g.open)
}

// cut reports whether the drain's bound passed (and what was in flight
// was cancelled).
func (g *gate) cut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.expired
}

// drainAll waits until the requests in flight of the removed servers gone
// have ended (idles, from their closed gates). They drain side by side
// under one bound: once it has passed, every gate is marked and then what
// is still under way on any of them is cancelled, and one warning names
// the servers it was cut on.
func (p *Proxy) drainAll(gone []*live, idles []<-chan struct{}, bound time.Duration) {
	all := make(chan struct{})
	go func() {
		for _, idle := range idles {
			<-idle
		}
		close(all)
	}()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-all:
		return
	case <-t.C:
	}
	var cancels []context.CancelFunc
	var servers []string
	calls := 0
	for _, l := range gone {
		cs, n := l.d.gate.expire()
		cancels = append(cancels, cs...)
		if n > 0 {
			servers = append(servers, l.d.cfg.ID)
			calls += n
		}
	}
	for _, c := range cancels {
		c()
	}
	if calls > 0 {
		p.logger.Warn("proxy: removed servers' calls were still under way at the end of the drain; cancelling them", "servers", servers, "calls", calls, "drain_timeout", bound)
	}
	<-all
}

// removedError is what a request for removed server id gets.
func removedError(id string) *jsonrpc.Error {
	return rpcError(jsonrpc.CodeInvalidRequest, "provlog: server %q was removed from the configuration, or changed and is being restarted once its calls under way end (live reload), so nothing was sent to it and nothing recorded; list the tools again", id)
}

// cancelledText is the error of a call the drain's bound cut short.
func (d *downstream) cancelledText(bound time.Duration) string {
	return fmt.Sprintf("server %q was removed from the configuration (or changed, to be restarted) and the call was still under way when the drain's %s passed; it was cancelled", d.cfg.ID, bound)
}

// drainTimeout is Options.DrainTimeout or its default.
func (p *Proxy) drainTimeout() time.Duration {
	if p.opts.DrainTimeout > 0 {
		return p.opts.DrainTimeout
	}
	return DefaultDrainTimeout
}

// removedName is a front name of a removed server, in p.removed.
type removedName struct {
	table nameTable
	name  string
}

// noteRemoved remembers server id's front names of table t, so that a
// request for one is told the server was removed rather than that no
// such name exists.
func (p *Proxy) noteRemoved(id string, t nameTable, names []string) {
	for _, n := range names {
		p.removed.Store(removedName{t, n}, id)
	}
}

// forgetRemoved forgets server id's names (it is being added again).
func (p *Proxy) forgetRemoved(id string) {
	p.removed.Range(func(k, v any) bool {
		if v == id {
			p.removed.Delete(k)
		}
		return true
	})
}

// refuseRemoved answers a request for a name of a removed server that no
// running server has taken since; nil for any other request.
func (p *Proxy) refuseRemoved(req mcp.Request) error {
	var key removedName
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params == nil {
			return nil
		}
		key = removedName{toolNames, r.Params.Name}
	case *mcp.GetPromptRequest:
		if r.Params == nil {
			return nil
		}
		key = removedName{promptNames, r.Params.Name}
	default:
		return nil
	}
	id, ok := p.removed.Load(key)
	if !ok || p.router.owner(key.table, key.name) != nil {
		return nil
	}
	return removedError(id.(string))
}
