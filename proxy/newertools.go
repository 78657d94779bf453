package proxy

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of a stdio server's newer session (revision.go): a second
// process, which the calls of 2026-07-28 clients go to, so its
// definitions are the ones those calls are made against, and it may
// change them on its own. The proxy reads its tool list too, when it
// connects and whenever it says the list changed, and records it as it
// records the first session's (recordTools: a tools entry when it differs
// from the last list of the session recorded, and a definition changed
// is reported: each session's list is compared with its own, its first
// with the first session's); a
// call to it names its definition (toolSum). The front's clients are
// offered the first session's lists.

// newerToolSlot is the slot of the newer session's tools in a
// catalogue's announced, asked and read.
const newerToolSlot = listSlots

// newerTools is what the newer session last listed.
type newerTools struct {
	cs   *mcp.ClientSession
	sums map[string]string // server tool name -> definition hash
}

// toolsChanged is the server's notification that its tools changed, sent
// on session cs. One from the newer session has its list read, and the
// first session's too, as before the newer one's list was read: the
// front's clients are told the tools changed when the first list is read
// after an announced change (a 2026-07-28 client subscribed to list
// changes, whose calls went to the newer process, waits for it: the
// conformance suite's server-stateless).
func (c *catalogue) toolsChanged(cs *mcp.ClientSession) {
	if cs != nil && cs != c.d.sup.current() {
		c.triggerResync(newerToolSlot, toolSlot)
		return
	}
	c.triggerResync(toolSlot)
}

// readNewerTools reads the tool list of the newer session cs and records
// it.
func (c *catalogue) readNewerTools(ctx context.Context, cs *mcp.ClientSession) {
	c.readMu[newerToolSlot].Lock()
	defer c.readMu[newerToolSlot].Unlock()
	c.announced.And(^uint32(1 << newerToolSlot))
	asked := c.begin(newerToolSlot)
	answered := false
	defer func() { c.readTo(newerToolSlot, asked, answered) }()
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil {
		c.setNewer(cs, map[string]string{})
		answered = true
		return
	}
	sctx, cancel := context.WithTimeout(ctx, listReadBound)
	defer cancel()
	raws, err := toolKind().list(sctx, cs)
	if err == nil {
		c.syncMu.Lock() // one list recorded at a time
		defer c.syncMu.Unlock()
		err = ctx.Err() // removed or replaced while it listed (retire)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.d.p.logger.Warn("proxy: listing the tools of the newer session failed; its calls name the first session's definitions", "server", c.d.cfg.ID, "error", err)
		}
		return
	}
	c.recordTools(newerSessionTools, raws)
	c.setNewer(cs, toolSums(raws))
	answered = true
}

func (c *catalogue) setNewer(cs *mcp.ClientSession, sums map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newer = newerTools{cs: cs, sums: sums}
}
