package proxy

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The lists of a stdio server's newer session (revision.go): a second
// process, which the calls and reads of 2026-07-28 clients go to, so its
// definitions are the ones those calls are made against, and it may
// change them on its own. The proxy reads its lists as it reads the
// first session's (catalogue.go: a loop per list, in slots of their own,
// newerSlot), when it connects, whenever it says one changed and when a
// front client lists (fresh.go), and records its tools as it records the
// first session's (recordTools: a tools entry when it differs from the
// last list of the session recorded, and a definition changed is
// reported: each session's list is compared with its own, its first with
// the first session's); a call to it names its definition (toolSum).
//
// The front registers the first session's items and those only the newer
// session lists (apply: newerOnly), so a name either offers is routed as
// any is. A 2026-07-28 client is shown each item as the newer session
// listed it (rawLists), the definition its calls and reads meet, and not
// the items it does not list; another client is shown the first
// session's, and not the items only the newer session lists.

// newerSlot is the slot of the newer session's list in slot (a list's)
// in a catalogue's reads: announced, asked, read and the like.
func newerSlot(slot listSlot) listSlot { return listSlots + slot }

// newerToolSlot is the slot of the newer session's tools list.
const newerToolSlot = listSlots + toolSlot

// newerTools is what the newer session last listed.
type newerTools struct {
	cs   *mcp.ClientSession
	sums map[string]string // server tool name -> definition hash; nil: not read
	// defs maps, per list, server name (URI, URI template) to the
	// definition as listed; the registrations of the items only this
	// session lists hold the same bytes.
	defs [listSlots]map[string]json.RawMessage
}

// listChanged is the server's notice, sent on session cs, that its lists
// in slots changed. One from the newer session has that session's lists
// read: their apply tells the front's clients, as the first session's
// does (a 2026-07-28 client subscribed to list changes, whose calls go to
// the newer process, waits for it: the conformance suite's
// server-stateless), and a client that lists after it is shown what the
// newer session lists now.
func (c *catalogue) listChanged(cs *mcp.ClientSession, slots ...listSlot) {
	if cs != nil && cs == c.d.newer.current() {
		for i, s := range slots {
			slots[i] = newerSlot(s)
		}
	}
	c.triggerResync(slots...)
}

// syncNewer reads the lists of the newer session cs, when it connects.
func (c *catalogue) syncNewer(ctx context.Context, cs *mcp.ClientSession) {
	var slots uint32
	for s := range listSlots {
		c.readMu[newerSlot(s)].Lock()
		defer c.readMu[newerSlot(s)].Unlock()
		slots |= 1 << newerSlot(s)
	}
	c.syncLists(ctx, cs, slots, false)
}

// noteNewer notes list slot of the newer session cs as read (raws, whose
// items are named by their nameKey member), and for the tools their
// definitions' hashes, and returns the first session's list as last
// applied, to be applied again with it. The caller holds syncMu.
func (c *catalogue) noteNewer(cs *mcp.ClientSession, slot listSlot, nameKey string, raws []json.RawMessage) []json.RawMessage {
	defs := namedDefinitions(raws, nameKey)
	var sums map[string]string
	if slot == toolSlot {
		sums = toolSums(raws)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.newer.cs != cs {
		c.newer = newerTools{cs: cs}
	}
	c.newer.defs[slot] = defs
	if sums != nil {
		c.newer.sums = sums
	}
	return c.lists[slot].first
}

// A newerItem is an item the newer session lists: its name (URI, URI
// template) and its definition as listed.
type newerItem struct {
	name string
	def  json.RawMessage
}

// newerListed returns the items of list slot that the newer session,
// while up, lists, in order of their names.
func (c *catalogue) newerListed(slot listSlot) []newerItem {
	up := c.d.newer.current()
	c.mu.Lock()
	defer c.mu.Unlock()
	if up == nil || c.newer.cs != up {
		return nil
	}
	var out []newerItem
	for _, name := range slices.Sorted(maps.Keys(c.newer.defs[slot])) {
		out = append(out, newerItem{name: name, def: c.newer.defs[slot][name]})
	}
	return out
}

// namedDefinitions maps the items of a list as read (raws) by their
// nameKey member.
func namedDefinitions(raws []json.RawMessage, nameKey string) map[string]json.RawMessage {
	defs := map[string]json.RawMessage{}
	for _, raw := range raws {
		var m map[string]json.RawMessage
		var name string
		if json.Unmarshal(raw, &m) == nil && json.Unmarshal(m[nameKey], &name) == nil && name != "" {
			defs[name] = raw
		}
	}
	return defs
}

// shownDefinition returns the definition of the item registered as front
// in list slot as a client is shown it: a 2026-07-28 client (newer) as
// the newer session lists it, if that session is up and its list was
// read, another client as the first session does; shown is false if the
// client is not shown it at all. def is nil if front is not registered.
func (c *catalogue) shownDefinition(slot listSlot, front string, newer bool) (def json.RawMessage, shown bool) {
	up := c.d.newer.current()
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[slot].reg[front]
	if !ok {
		return nil, true
	}
	return c.shownLocked(slot, r, newer, up)
}

// shownLocked is shownDefinition for registration r; up is the newer
// session if it is up. The caller holds c.mu.
func (c *catalogue) shownLocked(slot listSlot, r registration, newer bool, up *mcp.ClientSession) (json.RawMessage, bool) {
	if newer && up != nil && c.newer.cs == up && c.newer.defs[slot] != nil {
		def, listed := c.newer.defs[slot][r.name]
		if s, skipped := c.lists[slot].skipped[r.name]; skipped && s.newerOnly {
			return nil, false // its definition there is past maxListItem (apply)
		}
		return def, listed
	}
	return r.def, !r.newerOnly
}
