package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Servers while running: cmd's config reload adds, removes and replaces
// downstream servers without touching the front's sessions. A removed
// server's names leave the front at once (clients get list_changed), then
// its process or connection is closed: calls still on their way there are
// drained (drain.go), and requests that come for it later are refused,
// saying why.
//
// A changed server is replaced (ChangeServers): a new instance starts
// with the old one's names and definitions at the front, so clients see
// nothing vanish; the old instance takes no more requests and drains as a
// removed one does, and the requests that come meanwhile wait for the new
// instance (awaitStart, drain.go) until it has connected and listed what
// it offers, then go to it. Its lists replace the inherited ones as a
// server's changed lists do: only a definition that differs is registered
// again (one list_changed), recorded in a tools entry and reported as a
// changed tool. If it has not started within the bound (connectTimeout),
// the waiting requests are refused, saying so, and its names leave the
// front until it connects.

// A live server is one AddServer or New started, with what stops it.
type live struct {
	d      *downstream
	cancel context.CancelFunc
	done   chan struct{} // closed when its supervisor has returned
}

// downstreams returns the running servers, in the order they were added.
func (p *Proxy) downstreams() []*downstream {
	p.dsMu.RLock()
	defer p.dsMu.RUnlock()
	return p.ds
}

// ServerConfigs returns the configs of the running servers, in the order
// they were added.
func (p *Proxy) ServerConfigs() []ServerConfig {
	ds := p.downstreams()
	out := make([]ServerConfig, len(ds))
	for i, d := range ds {
		out[i] = d.cfg
	}
	return out
}

// start adds d to the running servers, in old's place if it replaces
// old, and starts its supervisor. The caller holds p.serversMu.
func (p *Proxy) start(d, old *downstream) {
	ctx, cancel := context.WithCancel(p.ctx)
	l := &live{d: d, cancel: cancel, done: make(chan struct{})}
	p.dsMu.Lock()
	ds := slices.Clone(p.ds) // replaced, never changed in place
	if i := slices.Index(ds, old); old != nil && i >= 0 {
		ds[i] = d
	} else {
		ds = append(ds, d)
	}
	p.ds = ds
	if p.live == nil {
		p.live = map[string]*live{}
	}
	p.live[d.cfg.ID] = l
	p.dsMu.Unlock()
	p.router.setServers(ds)
	p.wg.Add(1)
	go func() {
		defer close(l.done)
		d.run(ctx)
	}()
}

// AddServer starts downstream server cfg while the proxy runs. Its tools,
// prompts and resources appear at the front once it has connected and
// listed them (clients are told the lists changed); a server that does
// not start is retried with backoff, as at New. It is an error if cfg is
// not valid beside the running servers (its id or prefix is taken).
func (p *Proxy) AddServer(cfg ServerConfig) error {
	p.serversMu.Lock()
	defer p.serversMu.Unlock()
	if p.closed.Load() {
		return errors.New("proxy: closed")
	}
	if err := CheckServers(append(p.ServerConfigs(), cfg)); err != nil {
		return err
	}
	if cfg.Retain == RetainFull && p.opts.Blobs == nil {
		return fmt.Errorf("proxy: server %q retains full results, but there is no blob store", cfg.ID)
	}
	p.forgetRemoved(cfg.ID)
	p.start(newDownstream(p, cfg), nil)
	p.logger.Info("proxy: server added", "server", cfg.ID)
	return nil
}

// ChangeServers removes servers remove and replaces the running servers
// of replace's ids by new instances with those configs, as one change: the
// removed servers' names leave the front and all their gates close first,
// then the removed and the replaced instances drain side by side, so a
// reload that changes several busy servers takes one drain bound, not one
// per server (drainAll); then they are stopped, side by side too. It
// returns once every one has stopped. An id in remove that is not
// running is an error, and so is a replacement that is not valid beside
// the other servers (that server keeps running as it was); the others are
// changed all the same.
func (p *Proxy) ChangeServers(remove []string, replace []ServerConfig) error {
	p.serversMu.Lock()
	defer p.serversMu.Unlock()
	gone, idles, err := p.detach(remove)

	// Their names leave the front now; holding each one's syncMu through
	// its drain keeps a sync under way from registering them again.
	for _, l := range gone {
		l.d.cat.syncMu.Lock()
		id := l.d.cfg.ID
		l.d.cat.clearLocked(func(t nameTable, names []string) { p.noteRemoved(id, t, names) })
	}
	var handed []*live
	for _, cfg := range replace {
		old, idle, rerr := p.handOver(cfg)
		if rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		handed = append(handed, old)
		idles = append(idles, idle)
	}
	p.drainAll(slices.Concat(gone, handed), idles, p.drainTimeout())
	var wg sync.WaitGroup
	for _, l := range gone {
		wg.Go(func() {
			d := l.d
			l.retire()
			d.cat.clear() // what a sync under way registered as it stopped
			p.sources.Delete(d)
			p.logger.Info("proxy: server removed", "server", d.cfg.ID)
		})
	}
	for _, l := range handed {
		wg.Go(func() {
			// Its names are its successor's: they stay at the front.
			l.retire()
			p.sources.Delete(l.d)
			p.logger.Info("proxy: a changed server's old instance stopped", "server", l.d.cfg.ID)
		})
	}
	wg.Wait()
	return err
}

// retire stops a removed or replaced server whose drain is over, and
// waits until its supervisor has returned. Its catalogue's syncMu, held
// through the drain, is let go once its context is done, so a list read
// that was waiting to be applied applies nothing.
func (l *live) retire() {
	l.cancel()
	l.d.cat.syncMu.Unlock()
	l.d.stop()
	<-l.done
}

// handOver starts a new instance of the running server cfg.ID with
// config cfg in the old one's place: the new one takes over the old
// one's names at the front (its router claims and registrations) and
// waits there for it to start (awaitStart); the old one's gate is closed,
// and a request that reaches it then goes on to the new one. It returns
// the old one, with its catalogue's syncMu held for its drain, and its
// gate's idle channel. The caller holds p.serversMu.
func (p *Proxy) handOver(cfg ServerConfig) (*live, <-chan struct{}, error) {
	p.dsMu.RLock()
	old := p.live[cfg.ID]
	p.dsMu.RUnlock()
	if old == nil {
		return nil, nil, fmt.Errorf("proxy: no server %q", cfg.ID)
	}
	var others []ServerConfig
	for _, c := range p.ServerConfigs() {
		if c.ID != cfg.ID {
			others = append(others, c)
		}
	}
	if err := CheckServers(append(others, cfg)); err != nil {
		return nil, nil, fmt.Errorf("proxy: server %q keeps its old config: %w", cfg.ID, err)
	}
	if cfg.Retain == RetainFull && p.opts.Blobs == nil {
		return nil, nil, fmt.Errorf("proxy: server %q keeps its old config: it would retain full results, but there is no blob store", cfg.ID)
	}
	od := old.d
	d := newDownstream(p, cfg)
	d.handover = newHandover()
	od.cat.syncMu.Lock() // until retire: the old one's lists are not read again
	d.cat.inherit(od.cat)
	p.router.handOver(od, d)
	od.next.Store(d) // before its gate closes: a request it refuses goes on
	idle := od.gate.close()
	if od.handover != nil {
		od.handover.end(nil) // still starting: what waits for it goes on to d
	}
	p.start(d, od)
	p.logger.Info("proxy: server changed; its new instance starts, and its old one drains", "server", cfg.ID)
	return old, idle, nil
}

// inherit gives c, a new instance's catalogue, what the old instance's
// from has registered at the front, and the definitions it listed before
// (for reporting changed tools).
func (c *catalogue) inherit(from *catalogue) {
	from.mu.Lock()
	defer from.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.lists {
		c.lists[i].reg = maps.Clone(from.lists[i].reg)
		// The list the registrations came from goes with them: a read of
		// the newer session's list applies the first session's again
		// (noteNewer), and one made before this instance's first read
		// applied none, taking every inherited item from the older
		// clients and offering the newer session's as its own.
		c.lists[i].first = from.lists[i].first
		c.lists[i].skipped = maps.Clone(from.lists[i].skipped)
	}
	for i := range c.known {
		c.known[i] = maps.Clone(from.known[i])
	}
	c.changes = slices.Clone(from.changes)
}

// detach takes servers ids out of the running ones, closes their gates
// and then takes them out of the router, so that a request the router
// still sent there is either let in before or refused; it returns them
// with their gates' idle channels. An id that is not running is in the
// error. The caller holds p.serversMu.
func (p *Proxy) detach(ids []string) ([]*live, []<-chan struct{}, error) {
	p.dsMu.Lock()
	var gone []*live
	var idles []<-chan struct{}
	var errs []error
	for _, id := range ids {
		l := p.live[id]
		if l == nil {
			errs = append(errs, fmt.Errorf("proxy: no server %q", id))
			continue
		}
		delete(p.live, id)
		gone = append(gone, l)
		idles = append(idles, l.d.gate.close())
	}
	ds := make([]*downstream, 0, len(p.ds))
	for _, d := range p.ds {
		if p.live[d.cfg.ID] != nil && p.live[d.cfg.ID].d == d {
			ds = append(ds, d)
		}
	}
	p.ds = ds
	p.dsMu.Unlock()
	p.router.setServers(ds)
	return gone, idles, errors.Join(errs...)
}

// clear withdraws every name c's server has at the front.
func (c *catalogue) clear() {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.clearLocked(nil)
}

// clearLocked withdraws every name c's server has at the front, handing
// each kind's names to note (if not nil) before they leave, so that a
// request never finds a name gone but not yet noted. The caller holds
// c.syncMu.
func (c *catalogue) clearLocked(note func(nameTable, []string)) {
	c.clearSlots(1<<listSlots-1, note)
}

// clearSlots is clearLocked for the lists in slots (a bit per listSlot).
func (c *catalogue) clearSlots(slots uint32, note func(nameTable, []string)) {
	for _, l := range c.kinds {
		if slot, _, _, _ := l.where(); slots&(1<<slot) != 0 {
			l.(interface {
				clear(*catalogue, func(nameTable, []string))
			}).clear(c, note)
		}
	}
}

// clear withdraws c's registrations of this kind from the front server
// and the router, handing them to note first.
func (k *listKind[T]) clear(c *catalogue, note func(nameTable, []string)) {
	c.mu.Lock()
	var gone []string
	for front := range c.lists[k.slot].reg {
		gone = append(gone, front)
	}
	clear(c.lists[k.slot].reg)
	c.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	if note != nil {
		note(k.names, gone)
	}
	k.remove(c.d.p.server, gone...)
	for _, f := range gone {
		c.d.p.router.free(k.names, f, c.d)
	}
}
