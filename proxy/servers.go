package proxy

import (
	"context"
	"errors"
	"fmt"
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
func (p *Proxy) RemoveServer(id string) error {
	p.serversMu.Lock()
	defer p.serversMu.Unlock()
	p.dsMu.Lock()
	l := p.live[id]
	if l == nil {
		p.dsMu.Unlock()
		return fmt.Errorf("proxy: no server %q", id)
	}
	delete(p.live, id)
	ds := make([]*downstream, 0, len(p.ds))
	for _, d := range p.ds {
		if d != l.d {
			ds = append(ds, d)
		}
	}
	p.ds = ds
	p.dsMu.Unlock()
	p.router.setServers(ds)

	// Its names leave the front now; holding syncMu through the drain
	// keeps a sync under way from registering them again.
	d := l.d
	idle := d.gate.close()
	d.cat.syncMu.Lock()
	p.noteRemoved(id, d.cat.clearLocked())
	d.drain(idle, p.drainTimeout())
	l.cancel()
	d.cat.syncMu.Unlock()
	d.stop()
	<-l.done
	d.cat.clear() // what a sync under way registered as it stopped
	p.sources.Delete(id)
	p.logger.Info("proxy: server removed", "server", id)
	return nil
}

// clear withdraws every name c's server has at the front.
func (c *catalogue) clear() {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.clearLocked()
}

// clearLocked withdraws every name c's server has at the front and
// returns them, by name table; the caller holds c.syncMu.
func (c *catalogue) clearLocked() map[nameTable][]string {
	gone := map[nameTable][]string{}
	for _, l := range c.kinds {
		k := l.(interface {
			clear(*catalogue) (nameTable, []string)
		})
		t, names := k.clear(c)
		gone[t] = append(gone[t], names...)
	}
	return gone
}

// clear withdraws c's registrations of this kind from the front server
// and the router, and returns them with their name table.
func (k *listKind[T]) clear(c *catalogue) (nameTable, []string) {
	c.mu.Lock()
	var gone []string
	for front := range c.lists[k.slot].reg {
		gone = append(gone, front)
	}
	clear(c.lists[k.slot].reg)
	c.mu.Unlock()
	if len(gone) > 0 {
		k.remove(c.d.p.server, gone...)
		for _, f := range gone {
			c.d.p.router.free(k.names, f, c.d)
		}
	}
	return k.names, gone
}
