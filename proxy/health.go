package proxy

import "time"

// DownstreamHealth is one downstream server's state, for health checks.
type DownstreamHealth struct {
	ID        string
	State     string // StateStarting, StateUp, StateDown or StateStopped
	Since     time.Time
	LastError string
}

// Downstreams reports every configured downstream server's state, in
// config order.
func (p *Proxy) Downstreams() []DownstreamHealth {
	out := make([]DownstreamHealth, 0, len(p.ds))
	for _, d := range p.ds {
		d.mu.Lock()
		out = append(out, DownstreamHealth{ID: d.cfg.ID, State: d.state, Since: d.since, LastError: d.lastErr})
		d.mu.Unlock()
	}
	return out
}
