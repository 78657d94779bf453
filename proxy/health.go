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
	// Skipped counts, by kind ("tool", "prompt", "resource", "resource
	// template"), the server's items the front does not offer (refused by
	// the front server, or past what a client's list page can give; see
	// provlog__status's skipped_tools). Nil when there are none.
	Skipped map[string]int
}

// Downstreams reports every configured downstream server's state, in
// config order.
func (p *Proxy) Downstreams() []DownstreamHealth {
	ds := p.downstreams()
	out := make([]DownstreamHealth, 0, len(ds))
	for _, d := range ds {
		st := d.sup.status()
		out = append(out, DownstreamHealth{ID: d.cfg.ID, State: st.state, Since: st.since, LastError: st.lastErr,
			ToolChanges: d.cat.toolChanges(), Skipped: d.cat.skippedCounts()})
	}
	return out
}

// skippedCounts counts the items of each kind the front does not offer,
// of either session's list (nil: none).
func (c *catalogue) skippedCounts() map[string]int {
	nouns := [listSlots]string{toolSlot: "tool", promptSlot: "prompt", resourceSlot: "resource", templateSlot: "resource template"}
	c.mu.Lock()
	defer c.mu.Unlock()
	var n map[string]int
	for slot, l := range c.lists {
		if len(l.skipped) > 0 {
			if n == nil {
				n = map[string]int{}
			}
			n[nouns[slot]] += len(l.skipped)
		}
	}
	return n
}
