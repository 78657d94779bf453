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
	ds := p.downstreams()
	out := make([]DownstreamHealth, 0, len(ds))
	for _, d := range ds {
		st := d.sup.status()
		out = append(out, DownstreamHealth{ID: d.cfg.ID, State: st.state, Since: st.since, LastError: st.lastErr,
			ToolChanges: d.cat.toolChanges()})
	}
	return out
}
