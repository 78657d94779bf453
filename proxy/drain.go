package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Draining a removed server (ChangeServers): its names leave the front at
// once, requests already let in (calls, reads, prompts) go on to their end
// for up to Options.DrainTimeout, and then the ones still under way are
// cancelled, so they end as a client's cancellation does. Either way each
// goes through its one lifecycle to the end: a call's outcome is recorded
// before the server is stopped. A request that comes for the server once
// it is removed is refused, saying so, before anything is written or
// forwarded. Servers removed in one change (ChangeServers, as a reload
// does) drain side by side under the one bound (drainAll).

// DefaultDrainTimeout bounds how long ChangeServers lets a removed
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
	shut    chan struct{}                 // closed when the gate is closed (closing); made on first ask
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
	if !g.closed && g.shut != nil {
		close(g.shut)
	}
	g.closed = true
	idle := make(chan struct{})
	if len(g.open) == 0 {
		close(idle)
	} else {
		g.idle = idle
	}
	return idle
}

// closing returns a channel closed once the gate is closed: the server
// is being drained, and a request let in before waits for nothing the
// drain may hold (sessionFor).
func (g *gate) closing() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
		if g.closed {
			close(g.shut)
		}
	}
	return g.shut
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
	all := allClosed(idles)
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

// allClosed returns a channel closed once every one of chs is.
func allClosed(chs []<-chan struct{}) <-chan struct{} {
	all := make(chan struct{})
	go func() {
		for _, c := range chs {
			<-c
		}
		close(all)
	}()
	return all
}

// removedError is what a request for removed server id gets.
func removedError(id string) *jsonrpc.Error {
	return rpcError(jsonrpc.CodeInvalidRequest, "provlog: server %q was removed from the configuration (live reload), so nothing was sent to it and nothing recorded; list the tools again", id)
}

// A handover is the start of a changed server's new instance
// (ChangeServers): requests for its names wait for it until it has
// connected and listed what it offers (started), or until the bound has
// passed (startFailed).
type handover struct {
	done chan struct{} // closed when it is over
	mu   sync.Mutex
	over bool
	err  *jsonrpc.Error // why it failed; nil if it started (or was stopped first)
}

func newHandover() *handover { return &handover{done: make(chan struct{})} }

// end ends h with err, if it is not over; it reports whether it was not.
func (h *handover) end(err *jsonrpc.Error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over {
		return false
	}
	h.over, h.err = true, err
	close(h.done)
	return true
}

// enter lets a request for d in: it waits while d is a new instance
// starting, and goes on to the instance that replaced d if d's gate is
// closed. It returns the server the request goes to and its ticket
// there, or the error the client gets, having let nothing in.
func (d *downstream) enter(ctx context.Context) (*downstream, uint64, *jsonrpc.Error) {
	for {
		if err := d.awaitStart(ctx); err != nil {
			return nil, 0, err
		}
		if t, ok := d.gate.enter(); ok {
			return d, t, nil
		}
		n := d.next.Load()
		if d.p.stopping.Load() {
			return nil, 0, rpcError(jsonrpc.CodeInternalError, "provlog: the request to server %q was not made: provlog is stopping", d.cfg.ID)
		}
		if n == nil || n.cfg.toolPrefix() != d.cfg.toolPrefix() || n.cfg.uriPrefix() != d.cfg.uriPrefix() {
			// Its names are not the new instance's: they are gone.
			return nil, 0, removedError(d.cfg.ID)
		}
		d = n
	}
}

// admit lets call in into its server (enter), which becomes in.d, with
// the tool's name there: a new instance's lists may have changed it.
func (in *callIn) admit(ctx context.Context) *jsonrpc.Error {
	d, t, err := in.d.enter(ctx)
	if err != nil {
		return err
	}
	if d != in.d || d.handover != nil {
		name, ok := d.cat.name(toolSlot, in.params.Name)
		if !ok {
			d.gate.leave(t)
			return unknownTool(in.params.Name, d.cfg.ID)
		}
		in.d, in.tool = d, name
	}
	in.ticket = t
	return nil
}

// unknownTool is the error of a call of front tool front that its server
// id no longer offers.
func unknownTool(front, id string) *jsonrpc.Error {
	return rpcError(jsonrpc.CodeInvalidParams, "provlog: unknown tool %q (its server %q no longer offers it)", front, id)
}

// awaitStart waits while d is a changed server's new instance that has
// not started yet (bounded by watchStart), and returns the error a
// request gets if it did not start in time and is still down.
func (d *downstream) awaitStart(ctx context.Context) *jsonrpc.Error {
	h := d.handover
	if h == nil {
		return nil
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return rpcError(jsonrpc.CodeInternalError, "provlog: cancelled while server %q's new instance was starting (live reload); nothing was sent to it and nothing recorded", d.cfg.ID)
	}
	if h.err != nil && d.sup.current() == nil {
		return h.err
	}
	return nil
}

// started ends d's handover once it has connected and listed what it
// offers: the lists it could not read (slots without a bit in applied)
// drop what it inherited of them, which are not its own. The caller holds
// d.cat.syncMu, as startFailed does.
func (d *downstream) started(applied uint32) {
	h := d.handover
	if h == nil {
		return
	}
	h.mu.Lock()
	over := h.over
	h.mu.Unlock()
	if !over {
		d.cat.clearSlots(^applied, nil)
		h.end(nil)
	}
}

// startBound is how long a changed server's new instance has to start
// before the requests waiting for it are refused.
func (p *Proxy) startBound() time.Duration {
	if p.testingOnlyStartBound > 0 {
		return p.testingOnlyStartBound
	}
	return connectTimeout
}

// watchStart ends d's handover when the bound has passed (startFailed),
// or when d is stopped first (ctx): its waiting requests then go on to
// its own successor, or are refused as removed.
func (d *downstream) watchStart(ctx context.Context) {
	bound := d.p.startBound()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-d.handover.done:
	case <-ctx.Done():
		d.handover.end(nil)
	case <-t.C:
		d.startFailed(bound)
	}
}

// startFailed refuses the requests waiting for d, a changed server's new
// instance that has not started within bound, and takes the names it
// inherited off the front until it connects (its supervisor goes on
// trying, as for any server).
func (d *downstream) startFailed(bound time.Duration) {
	d.cat.syncMu.Lock()
	defer d.cat.syncMu.Unlock()
	_, why := d.session()
	if why == nil {
		why = errors.New("its lists were not read")
	}
	err := rpcError(jsonrpc.CodeInternalError, "provlog: server %q was changed in the configuration (live reload), and its new instance did not start within %s: %v; nothing was sent to it and nothing recorded", d.cfg.ID, bound, why)
	if !d.handover.end(err) {
		return
	}
	d.cat.clearLocked(nil)
	d.p.logger.Error("proxy: a changed server's new instance did not start in time; the calls waiting for it are refused and its tools leave the front until it is up", "server", d.cfg.ID, "bound", bound, "error", why)
}

// cancelledText is the error of a call the drain's bound cut short.
func (d *downstream) cancelledText(bound time.Duration) string {
	if d.p.stopping.Load() {
		return stoppedText // Close cut it
	}
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
