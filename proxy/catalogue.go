package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The catalogue: what one downstream server offers (tools, prompts,
// resources and resource templates), registered on the front server under
// front names, kept in step with the server's lists, and the tool
// definitions it listed (reads.go records them).
//
// The four lists are synced by one function, [listKind.sync]; a
// listKind says what differs between them (listkinds.go). The front's
// answers to its clients' lists are in frontlists.go.

// A listSlot is where a catalogue keeps one list's registrations.
type listSlot int

const (
	toolSlot listSlot = iota
	promptSlot
	resourceSlot
	templateSlot
	listSlots
)

// readSlots counts the lists a catalogue reads: each of the four, from
// the server's first session and from its newer one (newerSlot).
const readSlots = 2 * listSlots

// A catalogue is what one server has registered at the front.
type catalogue struct {
	d *downstream

	// syncMu is held to apply a list read (the front's registrations
	// and the tools entries), one at a time; readMu holds each list to
	// one read at a time (a loop per list, resyncLoop), so a server slow
	// to answer one of its lists delays no other.
	syncMu sync.Mutex
	readMu [readSlots]sync.Mutex
	resync [readSlots]chan struct{} // requests to read each list again, coalesced
	// announced holds a bit per listSlot whose list the server said has
	// changed since that list was last read.
	announced atomic.Uint32
	// asked counts the server's list changes of each list; read (under
	// mu) is the count its last read covers, and readNow is closed (and
	// replaced) when it grows. A call waits for the tools to be read
	// after a change it knows of (toolSum).
	asked   [readSlots]atomic.Uint64
	read    [readSlots]uint64
	readNow chan struct{}
	// wanted holds a bit per slot whose list a front client's list asked
	// to be read (fresh.go); begun counts the reads of each list begun
	// (under mu), begunAt is when the last began and covers the count of
	// the server's changes (asked) it covers, ended counts those ended,
	// and lateRead is the last read a list was answered without;
	// behind holds a bit per slot whose read a front list or a call
	// gave up waiting for, and which no read has answered since.
	wanted                 atomic.Uint32
	begun, ended, lateRead [readSlots]uint64
	begunAt                [readSlots]time.Time
	covers                 [readSlots]uint64
	behind                 uint32
	testingOnlyListBound   atomic.Int64 // replaces listBound's freshWait if not zero
	testingOnlyResyncGap   atomic.Int64 // replaces resyncLoop's freshFor if not zero
	// testingOnlyAskRead, if set, is called by askRead with its slot,
	// before the read is asked for: a test sees what was marked by then.
	// want calls askRead under mu, so it must not take mu.
	testingOnlyAskRead atomic.Pointer[func(listSlot)]

	mu         sync.Mutex
	lists      [listSlots]registry
	collisions map[string]bool // front names another server or the proxy holds
	// listed and known are kept for each session (firstSessionTools,
	// newerSessionTools): its last tools list recorded (tool name ->
	// definition hash, as last recorded in a tools entry; nil: not yet),
	// and the last definition hash of every name it listed, gone ones too
	// (maxKnownTools).
	listed, known [2]map[string]string
	newer         newerTools   // the lists of the server's newer session (newertools.go)
	changes       []ToolChange // definitions changed while the proxy ran
	// recording is the last tools entry begun (nil before the first).
	recording *toolsWrite

	kinds []lister // the four list kinds, in the order a sync reads them
}

// A registry is one list's registrations.
type registry struct {
	reg     map[string]registration // by front name (URI, URI template)
	skipped map[string]skip         // by server name: the items the front server refused
	// first is the first session's list as last applied: a read of the
	// newer session's applies it again, with the items only that one
	// lists (apply). reg cannot stand in for it: it holds, in the
	// server's order, the items the front refused (skipped), those whose
	// names another server holds and those listed twice, which are
	// applied again as they were (a name the first session lists is not
	// offered as the newer session's only, and skipped keeps saying
	// why). The items registered hold its very bytes (registration.def),
	// so the list is kept once.
	first []json.RawMessage
}

// A skip is an item the front does not offer: the front server refused
// it, or its definition is past what a list page can give (maxListItem).
type skip struct {
	why string
	// newerOnly: it is skipped from the newer session's list only (only
	// that session lists it, or its definition there is past
	// maxListItem): a 2026-07-28 client would have been shown it, as the
	// newer session lists it, no other.
	newerOnly bool
}

// A registration is one item registered at the front.
type registration struct {
	name string // its name (URI, URI template) on the server
	// def is its definition as the server listed it: the bytes of the
	// list read that holds it (registry.first, or the newer session's
	// newerTools.defs), not a copy of them; nothing writes to them.
	def json.RawMessage
	sum string // definitionSum(def)
	// newerOnly: only the server's newer session lists it, so only that
	// session's clients are shown it (frontDefinition), and a call of
	// another names no definition (toolSum).
	newerOnly bool
}

// paramHeaders reports whether front tool front's definition may bind
// arguments to HTTP headers (x-mcp-header, which the SDK's handler
// checks against a 2026-07-28 request's Mcp-Param-* headers), or is not
// registered.
func (c *catalogue) paramHeaders(front string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[toolSlot].reg[front]
	return !ok || bytes.Contains(r.def, []byte("x-mcp-header"))
}

func newCatalogue(d *downstream) *catalogue {
	c := &catalogue{d: d, collisions: map[string]bool{}, readNow: make(chan struct{}),
		kinds: []lister{toolKind(), promptKind(), resourceKind(), templateKind()}}
	for i := range c.resync {
		c.resync[i] = make(chan struct{}, 1)
	}
	for i := range c.lists {
		c.lists[i] = registry{reg: map[string]registration{}, skipped: map[string]skip{}}
	}
	return c
}

// name returns the server's name for front, registered in slot.
func (c *catalogue) name(slot listSlot, front string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[slot].reg[front]
	return r.name, ok
}

// triggerResync asks for the lists to be read again, after the server
// said the lists in slots changed. It must not block: it runs inside the
// SDK's notification handler.
//
// Every list the notice names is marked asked before any read starts: a
// read of the first that ended, and the front's notice of its change,
// came before the second was marked, so a client listing the second at
// once was answered from the read before the server's notice.
func (c *catalogue) triggerResync(slots ...listSlot) {
	for _, s := range slots {
		c.asked[s].Add(1)
		c.announced.Or(1 << s)
	}
	for _, s := range slots {
		c.askRead(s)
	}
}

// askRead has the list in slot read again (by its resyncLoop) once the
// read under way, if any, has ended. It does not block.
func (c *catalogue) askRead(slot listSlot) {
	if f := c.testingOnlyAskRead.Load(); f != nil {
		(*f)(slot)
	}
	select {
	case c.resync[slot] <- struct{}{}:
	default:
	}
}

// resyncLoops starts, for each list, the loop that reads it again
// whenever the server says it changed or a front client's list asks
// (resyncLoop), until ctx is done.
func (c *catalogue) resyncLoops(ctx context.Context) {
	for s := range listSlot(readSlots) {
		go c.resyncLoop(ctx, s)
	}
}

// resyncLoop reads the list in slot again when asked (askRead). Only the
// list the server said changed, or a front client's list asked for, is
// read: reading the other lists too held up the front's notification of
// the next change, and a loop per list (the newer session's too)
// lets no list wait for another's read (a server hung on its tools list
// held up the read of its prompts, and a front client's list of them).
//
// A read begins at most once every freshFor, as a front client's list
// reads (fresh.go): a server that changed its list and said so again
// after each read had it read again at once, each read a tools entry (a
// server of 2,000 tools wrote 94 MB of them a minute). Notices meanwhile
// are read together, once the gap is out.
func (c *catalogue) resyncLoop(ctx context.Context, slot listSlot) {
	var last time.Time // when the last read began
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.resync[slot]:
		}
		if wait := time.Until(last.Add(c.resyncGap())); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		c.resyncList(ctx, slot)
	}
}

// resyncGap is how long resyncLoop waits between reads: freshFor, or
// testingOnlyResyncGap.
func (c *catalogue) resyncGap() time.Duration {
	if g := c.testingOnlyResyncGap.Load(); g > 0 {
		return time.Duration(g)
	}
	return freshFor
}

// resyncList reads the list in slot, if the server said it changed or a
// front client's list asked for it.
func (c *catalogue) resyncList(ctx context.Context, slot listSlot) {
	bit := uint32(1) << slot
	wanted := c.wanted.Load()&bit != 0 // a read begun clears its bit (begin)
	if c.announced.Load()&bit == 0 && !wanted {
		return
	}
	session := c.d.sup.current
	if slot >= listSlots {
		session = c.d.newer.current
	}
	switch cs := session(); {
	case cs == nil && wanted:
		c.unread(slot)
	case cs == nil:
	default:
		c.readMu[slot].Lock()
		defer c.readMu[slot].Unlock()
		c.syncLists(ctx, cs, bit, false)
	}
}

// syncAll reads all the server's lists and makes the front server's
// match, when the proxy connects to it; a changed server's new instance
// has started then (started).
func (c *catalogue) syncAll(ctx context.Context, cs *mcp.ClientSession) {
	for s := range listSlots {
		c.readMu[s].Lock()
		defer c.readMu[s].Unlock()
	}
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.d.started(c.syncLists(ctx, cs, 1<<listSlots-1, true))
}

// errNotOffered is a list's sync when the server does not offer it.
var errNotOffered = errors.New("not offered")

// listReadBound is how long the reads of a server's lists may take: as
// long as connecting to it. Only the lists read wait for them (a loop per
// list), and a front client's list waits at most listBound.
const listReadBound = connectTimeout

// syncLists reads the server's lists in slots (a bit per listSlot, its
// newer session's at newerSlot) from session cs and makes the front
// server's match; the caller holds their readMu, and syncMu if held
// (else each list read takes it to be applied). It returns the slots
// whose lists were read and applied.
func (c *catalogue) syncLists(ctx context.Context, cs *mcp.ClientSession, slots uint32, held bool) (applied uint32) {
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	sctx, cancel := context.WithTimeout(ctx, listReadBound)
	defer cancel()
	for _, l := range c.kinds {
		first, _, _, _ := l.where()
		for _, slot := range []listSlot{first, newerSlot(first)} {
			if slots&(1<<slot) == 0 {
				continue
			}
			switch err := l.sync(sctx, c, cs, caps, slot, held); {
			case err == nil:
				applied |= 1 << slot
			case errors.Is(err, errNotOffered):
			case ctx.Err() == nil: // else the proxy is closing
				c.d.p.logger.Warn("proxy: listing "+c.slotName(slot)+" failed; the front offers the last list read", "server", c.d.cfg.ID, "error", c.d.secrets.scrub(err.Error()))
			}
		}
	}
	return applied
}

// slotName names the list read in slot, in log lines.
func (c *catalogue) slotName(slot listSlot) string {
	if slot >= listSlots {
		return c.kinds[slot-listSlots].plural() + " of the newer session"
	}
	return c.kinds[slot].plural()
}

// sync reads the list from session cs, in slot: the server's first
// session's (k.slot) or its newer's (newerSlot), and applies it, with
// c.syncMu held (taken for it unless held). A list of the newer session
// is noted (noteNewer), and the first session's applied again with it.
func (k *listKind[T]) sync(ctx context.Context, c *catalogue, cs *mcp.ClientSession, caps *mcp.ServerCapabilities, slot listSlot, held bool) error {
	announced := c.announced.And(^uint32(1<<slot))&(1<<slot) != 0
	// The changes announced before the list is asked for are in it; a
	// call waiting for them goes on when it is applied, or has failed.
	asked := c.begin(slot)
	answered := false
	defer func() { c.readTo(slot, asked, answered) }()
	newer := slot != k.slot
	var raws []json.RawMessage
	var err error
	switch {
	case k.offered(caps):
		raws, err = k.list(ctx, cs)
	case !newer:
		answered = true
		return errNotOffered
	} // a newer session that does not offer it lists none of it
	if err == nil && !held {
		c.syncMu.Lock()
		defer c.syncMu.Unlock()
		// A server removed or replaced while its list was read applies
		// nothing: its syncMu was held until its context ended (retire).
		err = ctx.Err()
	}
	if err != nil {
		if announced { // the next read owes the clients the notification
			c.announced.Or(1 << slot)
		}
		return err
	}
	session := firstSessionTools
	if newer {
		session = newerSessionTools
	}
	if k.listed != nil && k.offered(caps) {
		k.listed(c, session, raws)
	}
	if newer {
		raws = c.noteNewer(cs, k.slot, k.nameKey, raws)
	}
	k.apply(c, raws, announced)
	answered = true
	return nil
}

// maxListPages, maxListItems and maxListBytes bound a read of one list:
// a server that pages on past them (or in a loop) has the read fail, and
// the front offers the last list read, as for any failed read; the log
// says which bound it passed. 100,000 items is as many tool names as a
// catalogue remembers (maxKnownTools), a hundred front pages of go-sdk's
// default size. The pages' bytes are held until the list is read, and
// each page may have up to maxFrameBytes: 32 MiB of them in all is four
// times what a list of 100,000 tools described in 80 bytes each needs,
// where the pages alone allowed 16 GB.
const (
	maxListPages = 1000
	maxListItems = 100_000
	maxListBytes = 32 << 20
)

// list pages through the server's list, every page, and returns its
// items as the server sent them (see capture.go).
func (k *listKind[T]) list(ctx context.Context, cs *mcp.ClientSession) ([]json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	seen := map[string]int{} // cursor -> the page that gave it
	size := 0                // the pages' bytes
	for n := range maxListPages {
		cp := &capture{}
		next, typed, err := k.page(withCapture(ctx, cp), cs, cursor)
		raw := cp.last()
		cp.done()
		if err != nil {
			return nil, err
		}
		var page map[string]json.RawMessage
		var list []json.RawMessage
		if raw == nil || json.Unmarshal(raw, &page) != nil || json.Unmarshal(page[k.key], &list) != nil {
			// Not expected: the result went by without being captured.
			// Fall back to the SDK's re-encoding of the typed items.
			b, err := json.Marshal(typed)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &list); err != nil {
				return nil, err
			}
		}
		items = append(items, list...)
		if size += len(raw); size > maxListBytes {
			return nil, fmt.Errorf("listing %s: more than %d MiB in %d pages; the proxy reads at most %d MiB", k.key, maxListBytes>>20, n+1, maxListBytes>>20)
		}
		if len(items) > maxListItems {
			return nil, fmt.Errorf("listing %s: more than %d in %d pages; the proxy reads at most %d", k.key, maxListItems, n+1, maxListItems)
		}
		if next == "" {
			return items, nil
		}
		if at, ok := seen[next]; ok {
			return nil, fmt.Errorf("listing %s: page %d gave nextCursor %.64q, as page %d did: the server's pages go round in a loop", k.key, n+1, next, at)
		}
		seen[next], cursor = n+1, next
	}
	return nil, fmt.Errorf("listing %s: more than %d pages; the proxy reads at most %d", k.key, maxListPages, maxListPages)
}

// apply makes the front server's registrations of c's server match raws,
// the first session's list as the server sent it, with the items only
// its newer session lists (while it is up: newerOnly): what is new or
// changed is (re)added under its front name, what is gone is removed,
// what the front server refuses is skipped and reported once, and a name
// another server holds is left to it. When the server announced a change
// (announced) and none shows, one unchanged item is registered again,
// so the front's clients hear of the change as they would from the
// server directly.
func (k *listKind[T]) apply(c *catalogue, raws []json.RawMessage, announced bool) {
	d := c.d
	a := &applying{want: map[string]bool{}, skipped: map[string]skip{}, seen: map[string]bool{}}
	for _, raw := range raws {
		k.applyItem(c, a, raw, false)
	}
	first := maps.Clone(a.seen)
	for _, it := range c.newerListed(k.slot) {
		if !first[it.name] {
			k.applyItem(c, a, it.def, true)
			continue
		}
		// The first session's item, which a 2026-07-28 client is shown
		// as the newer session lists it (shownLocked): not if that
		// definition could be given in no page.
		if _, known := a.skipped[it.name]; !known {
			if why := k.pastList(&d.cfg, it.def, it.name); why != "" {
				a.skipped[it.name] = skip{why: why, newerOnly: true}
			}
		}
	}
	c.mu.Lock()
	c.lists[k.slot].first = raws
	fresh := c.lists[k.slot].skipped
	c.lists[k.slot].skipped = a.skipped
	var gone []string
	for front := range c.lists[k.slot].reg {
		if !a.want[front] {
			gone = append(gone, front)
			delete(c.lists[k.slot].reg, front)
		}
	}
	c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(a.skipped)) {
		if _, known := fresh[name]; !known {
			d.p.logger.Warn("proxy: skipping a "+k.noun+" the front cannot offer", "server", d.cfg.ID, k.logKey, d.secrets.scrub(name), "newer_session_only", a.skipped[name].newerOnly, "error", d.secrets.scrub(a.skipped[name].why))
		}
	}
	if announced && !a.changed && len(gone) == 0 && a.again != nil {
		addGuarded(a.again) // it was added once, so it is added again
	}
	if len(gone) > 0 {
		k.remove(d.p.server, gone...)
		for _, f := range gone {
			d.p.router.free(k.names, f, d)
		}
	}
}

// An applying is what an apply has found so far.
type applying struct {
	want    map[string]bool // front names registered
	skipped map[string]skip // by server name: the items the front server refused
	seen    map[string]bool // server names listed
	changed bool
	again   func() // re-registers one unchanged item
}

// applyItem registers one item of the list apply applies (raw, as the
// server listed it); newerOnly: only the newer session lists it.
func (k *listKind[T]) applyItem(c *catalogue, a *applying, raw json.RawMessage, newerOnly bool) {
	d := c.d
	item, err := k.decode(raw)
	name := ""
	if err == nil {
		name = *k.name(item)
	} else {
		name = nameOf(raw, k.nameKey)
	}
	if name == "" {
		d.p.logger.Warn("proxy: skipping a "+k.noun+" that is not a JSON object with a "+k.nameKey, "server", d.cfg.ID)
		return
	}
	if a.seen[name] {
		// Which one the server acts on is its own affair; the front
		// offers, and a tools entry holds, the last.
		d.p.logger.Warn("proxy: the server lists a "+k.noun+" more than once; the last definition listed is the one offered and recorded", "server", d.cfg.ID, k.logKey, name)
	}
	a.seen[name] = true
	if err != nil {
		a.skipped[name] = skip{why: err.Error(), newerOnly: newerOnly}
		return
	}
	front := k.prefix(&d.cfg) + name
	if why := k.pastList(&d.cfg, raw, name); why != "" {
		a.skipped[name] = skip{why: why, newerOnly: newerOnly}
		return
	}
	*k.name(item) = front
	if !c.claim(k.names, front, k.reserved != nil && k.reserved(d.p, front)) {
		return
	}
	if c.unchanged(k.slot, front, raw, newerOnly) {
		a.want[front] = true
		a.again = func() { k.add(d, item, front, name) }
		return
	}
	a.changed = true
	if err := addGuarded(func() { k.add(d, item, front, name) }); err != nil {
		d.p.router.free(k.names, front, d)
		a.skipped[name] = skip{why: err.Error(), newerOnly: newerOnly}
		return
	}
	a.want[front] = true
	c.mu.Lock()
	c.lists[k.slot].reg[front] = registration{name: name, def: raw, sum: definitionSum(raw), newerOnly: newerOnly}
	c.mu.Unlock()
}

// nameOf returns the string field key of a definition the SDK's type
// refused, to say which one was skipped.
func nameOf(raw json.RawMessage, key string) string {
	var fields map[string]json.RawMessage
	var name string
	if json.Unmarshal(raw, &fields) == nil {
		json.Unmarshal(fields[key], &name)
	}
	return name
}

// claim claims front for c's server in the router, unless another server
// holds it or the proxy keeps it (reserved); the first refusal of each
// name is logged and kept for provlog__status.
func (c *catalogue) claim(t nameTable, front string, reserved bool) bool {
	if !reserved && c.d.p.router.claim(t, front, c.d) {
		return true
	}
	c.mu.Lock()
	known := c.collisions[front]
	c.collisions[front] = true
	c.mu.Unlock()
	if !known {
		c.d.p.logger.Warn("proxy: name taken by another server; skipped", "server", c.d.cfg.ID, "name", front)
	}
	return false
}

// unchanged reports whether front is registered with this very definition,
// for the same clients (newerOnly), so a re-sync does not re-add it (which
// would notify every client). If so, the registration takes raw, the
// same bytes as the list now kept has them: holding on to the bytes of
// the list before would keep two copies of every item unchanged.
func (c *catalogue) unchanged(slot listSlot, front string, raw json.RawMessage, newerOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[slot].reg[front]
	if !ok || !bytes.Equal(r.def, raw) || r.newerOnly != newerOnly {
		return false
	}
	r.def = raw
	c.lists[slot].reg[front] = r
	return true
}

// collisionList names the front names c's server could not have.
func (c *catalogue) collisionList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.collisions {
		out = append(out, fmt.Sprintf("%s (server %q)", n, c.d.cfg.ID))
	}
	return out
}

// report adds the catalogue's part of the server's provlog__status entry.
//
// Its tools are counted as the front's clients are shown them
// (shownDefinition), per process: "tools" what a client of 2025-11-25 or
// before is shown (the first process's), and in the newer session's part
// (which health adds first) what a 2026-07-28 client is shown. Counting
// every registration added the tools only the newer process lists to the
// first's, a figure no client's list matches, and an operator who counts
// a client's tools/list against it saw tools that client can neither see
// nor call. It is per process rather than as the calling client's
// revision sees it: provlog__status gives every caller the same answer,
// and an operator asking why two clients are shown different lists needs
// both figures.
//
// The tools the front server refused are told apart the same way:
// "skipped_tools" those of the first process's list, the newer session's
// "skipped_tools" those only the newer process lists. One map of both
// named tools no 2025-11-25 client could have been shown among those
// skipped from its list, and a reader could not tell which process
// listed which.
func (c *catalogue) report(h map[string]any) {
	up := c.d.newer.current()
	c.mu.Lock()
	defer c.mu.Unlock()
	var older, newer int
	for _, r := range c.lists[toolSlot].reg {
		if _, shown := c.shownLocked(toolSlot, r, false, up); shown {
			older++
		}
		if _, shown := c.shownLocked(toolSlot, r, true, up); shown {
			newer++
		}
	}
	h["tools"] = older
	if ns, _ := h["newer_session"].(map[string]any); ns != nil {
		ns["tools"] = newer
	}
	first, newerOnly := map[string]any{}, map[string]any{}
	for name, s := range c.lists[toolSlot].skipped {
		name, why := c.d.secrets.scrub(name), c.d.secrets.scrub(s.why) // as the log line shows them
		if s.newerOnly {
			newerOnly[name] = why
		} else {
			first[name] = why
		}
	}
	if len(first) > 0 {
		h["skipped_tools"] = first
	}
	if ns, _ := h["newer_session"].(map[string]any); ns != nil && len(newerOnly) > 0 {
		ns["skipped_tools"] = newerOnly
	}
	if len(c.changes) > 0 {
		h["tool_changes"] = slices.Clone(c.changes)
	}
	if len(c.collisions) > 0 {
		h["name_collisions"] = slices.Sorted(maps.Keys(c.collisions))
	}
}

// toolChanges returns the definitions changed while the proxy ran.
func (c *catalogue) toolChanges() []ToolChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.changes)
}

// addGuarded runs an SDK Add* call, turning its panic (the SDK panics on
// schemas and URIs it rejects) into an error.
func addGuarded(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	add()
	return nil
}
