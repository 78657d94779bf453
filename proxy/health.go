package proxy

import "time"

// DownstreamHealth is one downstream server's state, for health checks.
type DownstreamHealth struct {
	ID        string
	State     string // StateStarting, StateUp, StateDown or StateStopped
	Since     time.Time
	LastError string
	// ToolChanges are the tool definitions the server changed while the
	// proxy ran (the latest maxToolChanges), oldest first.
	ToolChanges []ToolChange
}

// Downstreams reports every configured downstream server's state, in
// config order.
func (p *Proxy) Downstreams() []DownstreamHealth {
	out := make([]DownstreamHealth, 0, len(p.ds))
	for _, d := range p.ds {
		d.mu.Lock()
		out = append(out, DownstreamHealth{ID: d.cfg.ID, State: d.state, Since: d.since, LastError: d.lastErr,
			ToolChanges: append([]ToolChange(nil), d.changes...)})
		d.mu.Unlock()
	}
	return out
}
