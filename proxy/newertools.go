package proxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The lists of a stdio server's newer session (revision.go): a second
// process, which the calls and reads of 2026-07-28 clients go to, so its
// definitions are the ones those calls are made against, and it may
// change them on its own. The proxy reads its lists too, when it
// connects, whenever it says its tools changed and when a front client
// lists (fresh.go), and records its tools as it records the first
// session's (recordTools: a tools entry when it differs from the last
// list of the session recorded, and a definition changed is reported:
// each session's list is compared with its own, its first with the first
// session's); a call to it names its definition (toolSum). A 2026-07-28
// client is shown the newer session's definition of each item the front
// offers (rawLists), the definition its calls and reads meet, and not
// the items it no longer lists; an item only it lists is not offered at
// the front (the front's names are the first session's).

// newerToolSlot is the slot of the newer session's lists in a
// catalogue's announced, asked and read.
const newerToolSlot = listSlots

// newerTools is what the newer session last listed.
type newerTools struct {
	cs   *mcp.ClientSession
	sums map[string]string            // server tool name -> definition hash
	defs [listSlots]map[string]string // per list, server name (URI, URI template) -> definition as listed
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
// it, and notes its other lists (readNewerLists).
func (c *catalogue) readNewerTools(ctx context.Context, cs *mcp.ClientSession) {
	c.readMu[newerToolSlot].Lock()
	defer c.readMu[newerToolSlot].Unlock()
	c.announced.And(^uint32(1 << newerToolSlot))
	asked := c.begin(newerToolSlot)
	answered := false
	defer func() { c.readTo(newerToolSlot, asked, answered) }()
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil {
		c.setNewer(cs, map[string]string{})
		c.readNewerLists(ctx, cs, nil)
		answered = true
		return
	}
	sctx, cancel := context.WithTimeout(ctx, listReadBound)
	defer cancel()
	raws, err := toolKind().list(sctx, cs)
	if err == nil {
		c.syncMu.Lock()                  // one list recorded at a time
		if err = ctx.Err(); err == nil { // else removed or replaced while it listed (retire)
			c.recordTools(newerSessionTools, raws)
			c.setNewer(cs, toolSums(raws))
		}
		c.syncMu.Unlock()
	}
	if err != nil {
		if ctx.Err() == nil {
			c.d.p.logger.Warn("proxy: listing the tools of the newer session failed; its calls name the first session's definitions", "server", c.d.cfg.ID, "error", err)
		}
		return
	}
	c.readNewerLists(ctx, cs, raws)
	answered = true
}

func (c *catalogue) setNewer(cs *mcp.ClientSession, sums map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defs := c.newer.defs
	if c.newer.cs != cs {
		defs = [listSlots]map[string]string{}
	}
	c.newer = newerTools{cs: cs, sums: sums, defs: defs}
}

// readNewerLists notes the definitions of the newer session cs's lists,
// its tools (as read) and the other three (read here), for its clients'
// lists; a list it fails to give keeps the definitions read before.
func (c *catalogue) readNewerLists(ctx context.Context, cs *mcp.ClientSession, tools []json.RawMessage) {
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	sctx, cancel := context.WithTimeout(ctx, listReadBound)
	defer cancel()
	var defs [listSlots]map[string]string
	defs[toolSlot] = namedDefinitions(tools, toolKind().nameKey)
	var errs [listSlots]error
	defs[promptSlot], errs[promptSlot] = newerList(sctx, cs, caps, promptKind())
	defs[resourceSlot], errs[resourceSlot] = newerList(sctx, cs, caps, resourceKind())
	defs[templateSlot], errs[templateSlot] = newerList(sctx, cs, caps, templateKind())
	for slot, err := range errs {
		if err != nil && ctx.Err() == nil {
			c.d.p.logger.Warn("proxy: listing the "+c.kinds[slot].plural()+" of the newer session failed; its clients are shown those read before",
				"server", c.d.cfg.ID, "error", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newer.cs != cs {
		return
	}
	for slot, m := range defs {
		if errs[slot] == nil {
			c.newer.defs[slot] = m
		}
	}
}

// newerList reads list k of the newer session cs and returns its
// definitions by name (none if it offers no such list).
func newerList[T any](ctx context.Context, cs *mcp.ClientSession, caps *mcp.ServerCapabilities, k *listKind[T]) (map[string]string, error) {
	if !k.offered(caps) {
		return map[string]string{}, nil
	}
	raws, err := k.list(ctx, cs)
	if err != nil {
		return nil, err
	}
	return namedDefinitions(raws, k.nameKey), nil
}

// namedDefinitions maps the items of a list as read (raws) by their
// nameKey member.
func namedDefinitions(raws []json.RawMessage, nameKey string) map[string]string {
	defs := map[string]string{}
	for _, raw := range raws {
		var m map[string]json.RawMessage
		var name string
		if json.Unmarshal(raw, &m) == nil && json.Unmarshal(m[nameKey], &name) == nil && name != "" {
			defs[name] = string(raw)
		}
	}
	return defs
}

// newerDefinition returns the definition of the item named name (on the
// server) in list slot as the newer session listed it, if that session
// is up and listed it (listed); read reports that it is up and its list
// was read.
func (c *catalogue) newerDefinition(slot listSlot, name string) (def string, listed, read bool) {
	up := c.d.newer.current()
	c.mu.Lock()
	defer c.mu.Unlock()
	if up == nil || c.newer.cs != up || c.newer.defs[slot] == nil {
		return "", false, false
	}
	def, listed = c.newer.defs[slot][name]
	return def, listed, true
}
