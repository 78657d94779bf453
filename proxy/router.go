package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The router: which downstream server a front name goes to, and which
// client session a server's own message goes back to. Each server's
// catalogue claims the front names it registers here; a name one server
// holds is refused to the others.

// A nameTable is one of the router's name spaces.
type nameTable int

const (
	toolNames     nameTable = iota
	promptNames             // front prompt names
	resourceNames           // front resource URIs and URI templates, one space
	nameTables
)

// A router maps front names to the servers that registered them.
type router struct {
	mu     sync.Mutex
	ds     []*downstream // every server, in config order (replaced, never changed in place)
	owners [nameTables]map[string]*downstream
}

// setServers replaces the servers the router knows.
func (r *router) setServers(ds []*downstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ds = ds
}

func newRouter() *router {
	r := &router{}
	for i := range r.owners {
		r.owners[i] = map[string]*downstream{}
	}
	return r
}

// claim records front in table t as d's, unless another server holds it.
// It reports whether d may register it.
func (r *router) claim(t nameTable, front string, d *downstream) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.owners[t][front]; o != nil && o != d {
		return false
	}
	r.owners[t][front] = d
	return true
}

// free gives up d's claim on front, if it holds one.
func (r *router) free(t nameTable, front string, d *downstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owners[t][front] == d {
		delete(r.owners[t], front)
	}
}

// handOver gives to every name from holds: to is a new instance of
// from's server (ChangeServers).
func (r *router) handOver(from, to *downstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, names := range r.owners {
		for n, d := range names {
			if d == from {
				names[n] = to
			}
		}
	}
}

func (r *router) owner(t nameTable, front string) *downstream {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners[t][front]
}

// tool returns the server of front tool name front and the tool's name
// there (nil, "" if no server has it).
func (r *router) tool(front string) (*downstream, string) {
	return r.named(toolNames, toolSlot, front)
}

// prompt returns the server of front prompt name front and the prompt's
// name there.
func (r *router) prompt(front string) (*downstream, string) {
	return r.named(promptNames, promptSlot, front)
}

func (r *router) named(t nameTable, slot listSlot, front string) (*downstream, string) {
	d := r.owner(t, front)
	if d == nil {
		return nil, ""
	}
	name, ok := d.cat.name(slot, front)
	if !ok {
		return nil, ""
	}
	return d, name
}

// resource finds the server a front resource URI belongs to and returns
// its URI there: the server that registered it (as a resource or as a
// template), else the one whose URI prefix it has, else the only server
// without a prefix.
func (r *router) resource(uri string) (*downstream, string, bool) {
	if d := r.owner(resourceNames, uri); d != nil {
		return d, strings.TrimPrefix(uri, d.cfg.uriPrefix()), true
	}
	r.mu.Lock()
	ds := r.ds
	r.mu.Unlock()
	var bare []*downstream
	for _, d := range ds {
		up := d.cfg.uriPrefix()
		if up == "" {
			bare = append(bare, d)
		} else if strings.HasPrefix(uri, up) {
			return d, strings.TrimPrefix(uri, up), true
		}
	}
	if len(bare) == 1 {
		return bare[0], uri, true
	}
	return nil, "", false
}

// callers are the upstream calls in progress on one server: a sampling or
// elicitation request, or a log message, from the server goes to the
// session that made them.
type callers struct {
	server string // its id, for errors

	mu   sync.Mutex
	next uint64
	m    map[uint64]*inflightCall
}

// An inflightCall is an upstream tools/call (or read) waiting on the
// server.
type inflightCall struct {
	session *mcp.ServerSession
	actor   string // who made it: a log message goes to no session of another (logRecipients)
	ctx     context.Context
	secrets *callSecrets // the call's, which its client's answers join (nil: a read's)
}

// begin notes an upstream call in progress; end(id) ends it.
func (c *callers) begin(ic *inflightCall) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uint64]*inflightCall{}
	}
	c.next++
	c.m[c.next] = ic
	return c.next
}

func (c *callers) end(id uint64) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

func (c *callers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// caller returns the upstream call a server-initiated message belongs to:
// MCP does not tie such a message to the call that caused it, so it goes
// to the one client session with calls in progress on this server (its
// latest call). With none, or with calls from several sessions, there is
// no telling, and the error says so. A call without a front session (a
// 2026-07-28 client's, sessionless) is a client of its own: two such
// calls in progress are two clients, perhaps two actors'.
func (c *callers) caller(what string) (*inflightCall, error) {
	calls, _ := c.bySession()
	switch {
	case len(calls) == 0:
		return nil, fmt.Errorf("provlog: no client call is in progress on server %q to send its %s to", c.server, what)
	case len(calls) > 1:
		return nil, fmt.Errorf("provlog: %d client sessions have calls in progress on server %q; cannot tell which one its %s is for", len(calls), c.server, what)
	}
	return calls[0], nil
}

// bySession returns the latest call in progress of each client session
// with calls in progress (each sessionless call its own), and the number
// of actors who made them.
func (c *callers) bySession() (calls []*inflightCall, actors int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	type client struct {
		session *mcp.ServerSession
		call    uint64 // a sessionless call's own id; 0 for a session's calls
	}
	latest := map[client]uint64{}
	who := map[string]bool{}
	for id, ic := range c.m {
		k := client{session: ic.session}
		if ic.session == nil {
			k.call = id
		}
		latest[k] = max(latest[k], id)
		who[ic.actor] = true
	}
	for _, id := range latest {
		calls = append(calls, c.m[id])
	}
	return calls, len(who)
}
