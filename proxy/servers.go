package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Servers while running: cmd's config reload adds and removes downstream
// servers (a changed server is removed and added again) without touching
// the front's sessions. A removed server's names leave the front at once
// (clients get list_changed), then its process or connection is closed:
// calls still on their way there are drained (drain.go), and requests
// that come for it later are refused, saying why.

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

// start adds d to the running servers and starts its supervisor. The
// caller holds p.serversMu.
func (p *Proxy) start(d *downstream) {
	ctx, cancel := context.WithCancel(p.ctx)
	l := &live{d: d, cancel: cancel, done: make(chan struct{})}
	p.dsMu.Lock()
	p.ds = append(p.ds[:len(p.ds):len(p.ds)], d)
	if p.live == nil {
		p.live = map[string]*live{}
	}
	p.live[d.cfg.ID] = l
	p.dsMu.Unlock()
	p.router.setServers(p.ds)
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
	p.start(newDownstream(p, cfg))
	p.logger.Info("proxy: server added", "server", cfg.ID)
	return nil
}

// RemoveServer withdraws server id's names from the front, then stops it
// and waits until its supervisor has returned.
func (p *Proxy) RemoveServer(id string) error { return p.RemoveServers(id) }

// RemoveServers removes servers ids as one change: all their names leave
// the front and their gates close first, then they drain side by side, so
// a reload that removes several busy servers takes one drain bound, not
// one per server (drainAll); then they are stopped, side by side too. It
// returns once every one has stopped. An id that is not
// running is an error; the others are removed all the same.
func (p *Proxy) RemoveServers(ids ...string) error {
	p.serversMu.Lock()
	defer p.serversMu.Unlock()
	gone, idles, err := p.detach(ids)

	// Their names leave the front now; holding each one's syncMu through
	// its drain keeps a sync under way from registering them again.
	for _, l := range gone {
		l.d.cat.syncMu.Lock()
		id := l.d.cfg.ID
		l.d.cat.clearLocked(func(t nameTable, names []string) { p.noteRemoved(id, t, names) })
	}
	p.drainAll(gone, idles, p.drainTimeout())
	var wg sync.WaitGroup
	for _, l := range gone {
		wg.Go(func() {
			d := l.d
			l.cancel()
			d.cat.syncMu.Unlock() // locked above, for the drain
			d.stop()
			<-l.done
			d.cat.clear() // what a sync under way registered as it stopped
			p.sources.Delete(d.cfg.ID)
			p.logger.Info("proxy: server removed", "server", d.cfg.ID)
		})
	}
	wg.Wait()
	return err
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
	for _, l := range c.kinds {
		l.(interface {
			clear(*catalogue, func(nameTable, []string))
		}).clear(c, note)
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
