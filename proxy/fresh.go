package proxy

import (
	"cmp"
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Fresh lists: a server may change a definition without telling its
// clients (no list_changed), and the front would go on offering the one
// it registered, and its calls be recorded against it. So a front
// client's list (its first page) reads the servers' lists before it is
// answered, through the catalogue's resync loop as a list_changed does
// (catalogue.go): a definition changed is registered, recorded (a tools
// entry) and reported, and the front's clients hear the list changed.
//
// The reads are shared: a read of a list begun within freshFor serves
// every list asked for meanwhile (waiting for it if it is still under
// way), and the lists asked for while an older read is under way share
// the next. A 2026-07-28 client may list before each of its requests; a
// burst of lists costs each server one read a second at most. A list
// waits at most freshWait for the reads; a server that has not answered
// by then leaves the front its last list read, and the log says so.
// Until a read of that list answers, the front's lists do not wait for
// it again (they ask for it to be read, and are shown the last list
// read): a server hung on a list costs the front's clients one wait, not
// one per list, and the other servers' lists, read meanwhile, are shown
// as fresh as ever. Each list of a server is read by a loop of its own
// (catalogue.go), so one list hung holds up no other.
//
// Calls do not read the list: between lists, a call names the
// definition read last (toolSum), so the call path costs what it did.

// freshFor is how long a read of a list, from when it began, serves the
// front's clients' lists.
const freshFor = time.Second

// freshWait is how long a front client's list waits for the servers'
// reads (listBound): a server that has not listed by then is offered as
// it was last read, and its read goes on (at most listReadBound), the
// front hearing of any change when it ends.
const freshWait = 5 * time.Second

// freshSlots returns the slots whose lists a front client's list
// request, with params, reads first; none for a later page (its list was
// read for the first) or another request.
func freshSlots(params mcp.Params) []listSlot {
	first := func(cursor string, slots ...listSlot) []listSlot {
		if cursor != "" {
			return nil
		}
		return slots
	}
	switch pr := params.(type) {
	// The newer session's lists too: the calls and reads of 2026-07-28
	// clients go there, and those clients are shown its definitions.
	case *mcp.ListToolsParams:
		return first(cmp.Or(pr, &mcp.ListToolsParams{}).Cursor, toolSlot, newerSlot(toolSlot))
	case *mcp.ListPromptsParams:
		return first(cmp.Or(pr, &mcp.ListPromptsParams{}).Cursor, promptSlot, newerSlot(promptSlot))
	case *mcp.ListResourcesParams:
		return first(cmp.Or(pr, &mcp.ListResourcesParams{}).Cursor, resourceSlot, newerSlot(resourceSlot))
	case *mcp.ListResourceTemplatesParams:
		return first(cmp.Or(pr, &mcp.ListResourceTemplatesParams{}).Cursor, templateSlot, newerSlot(templateSlot))
	}
	return nil
}

// freshLists has every running server's lists in slots read, unless read
// within freshFor, and waits for the reads, at most listBound.
func (p *Proxy) freshLists(ctx context.Context, slots []listSlot) {
	if len(slots) == 0 {
		return
	}
	type wait struct {
		c    *catalogue
		slot listSlot
		n    uint64
	}
	var waits []wait
	for _, d := range p.downstreams() {
		for _, s := range slots {
			if n, ok := d.cat.want(s); ok {
				waits = append(waits, wait{d.cat, s, n})
			}
		}
	}
	if len(waits) == 0 {
		return
	}
	// One bound for all: the servers' reads run at once (a resync loop
	// each).
	wctx, cancel := context.WithTimeout(ctx, waits[0].c.listBound())
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)() // the proxy is closing
	for _, w := range waits {
		if !w.c.await(func() bool { return w.c.ended[w.slot] >= w.n }, wctx.Done()) && ctx.Err() == nil && p.ctx.Err() == nil {
			w.c.late(w.slot, w.n)
		}
	}
}

// want returns the count of reads of the list in slot that the front's
// list waits for: the read begun within freshFor that covers every change
// the server announced, or the next, which it asks the resync loop for.
// It reports false when there is nothing to wait for: the read has
// ended, the list has no one to read it (the server, or its newer session,
// is not up), or the server is behind on it (a list gave up waiting for
// it, and it has not answered since).
func (c *catalogue) want(slot listSlot) (uint64, bool) {
	if slot >= listSlots {
		if c.d.newer.current() == nil {
			return 0, false
		}
	} else if c.d.sup.current() == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	behind := c.behind&(1<<slot) != 0
	// A read begun before the server's latest notice of a change to the
	// list does not serve: a client that lists at once on hearing the
	// change (the front tells it as soon as the list the notice named
	// first is applied) would be shown the list from before it.
	if c.begun[slot] > 0 && time.Since(c.begunAt[slot]) < freshFor && c.asked[slot].Load() <= c.covers[slot] {
		return c.begun[slot], c.ended[slot] < c.begun[slot] && !behind
	}
	// Under c.mu: the read asked for is the next to begin, which clears
	// the bit (begin).
	c.wanted.Or(1 << slot)
	c.askRead(slot)
	return c.begun[slot] + 1, !behind
}

// begin notes that a read of the list in slot begins, and returns the
// count of the server's announced changes of it the read covers (readTo).
// The read serves the front lists that asked for one before it.
func (c *catalogue) begin(slot listSlot) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wanted.And(^uint32(1 << slot))
	c.begun[slot]++
	c.begunAt[slot] = time.Now()
	c.covers[slot] = c.asked[slot].Load()
	return c.covers[slot]
}

// unread ends, unread, the read that front lists asked for of the list
// in slot while the server is down, so that no list waits for it.
func (c *catalogue) unread(slot listSlot) {
	c.readMu[slot].Lock()
	defer c.readMu[slot].Unlock()
	c.begin(slot)
	c.readTo(slot, 0, false)
}

// late logs, once per read, that a front list is answered, or a call
// named its tool's definition, without read n of the list in slot, which
// the server had not answered in time; the server is behind on the list
// until a read of it answers.
func (c *catalogue) late(slot listSlot, n uint64) {
	c.mu.Lock()
	logged := c.lateRead[slot] >= n
	c.lateRead[slot] = max(c.lateRead[slot], n)
	if c.ended[slot] < n {
		c.behind |= 1 << slot
	}
	c.mu.Unlock()
	if logged {
		return
	}
	c.d.p.logger.Warn("proxy: the server did not list its "+c.slotName(slot)+" in time; the front's clients are shown, and calls name, the last list read, without waiting, until it does",
		"server", c.d.cfg.ID, "bound", c.listBound())
}

// listBound is how long a front client's list waits for the servers'
// reads: freshWait, or testingOnlyListBound.
func (c *catalogue) listBound() time.Duration {
	if b := c.testingOnlyListBound.Load(); b > 0 {
		return time.Duration(b)
	}
	return freshWait
}

// await waits until done (run under c.mu) holds, or stop is closed; it
// reports whether done holds.
func (c *catalogue) await(done func() bool, stop <-chan struct{}) bool {
	for {
		c.mu.Lock()
		ok, now := done(), c.readNow
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-now:
		case <-stop:
			return false
		}
	}
}
