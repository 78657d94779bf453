package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// listKind says what differs between them.

// A listSlot is where a catalogue keeps one list's registrations.
type listSlot int

const (
	toolSlot listSlot = iota
	promptSlot
	resourceSlot
	templateSlot
	listSlots
)

// A catalogue is what one server has registered at the front.
type catalogue struct {
	d *downstream

	syncMu sync.Mutex    // one sync at a time
	resync chan struct{} // list_changed notifications, coalesced
	// announced holds a bit per listSlot whose list the server said has
	// changed since that list was last read.
	announced atomic.Uint32
	// asked counts the server's list changes of each list; read (under
	// mu) is the count its last read covers, and readNow is closed (and
	// replaced) when it grows. A call waits for the tools to be read
	// after a change it knows of (toolSum).
	asked   [listSlots + 1]atomic.Uint64 // and newerToolSlot's
	read    [listSlots + 1]uint64
	readNow chan struct{}
	// wanted holds a bit per slot whose list a front client's list asked
	// to be read (fresh.go); begun counts the reads of each list begun
	// (under mu), begunAt is when the last began, ended counts those
	// ended, and lateRead is the last read a list was answered without.
	wanted                 atomic.Uint32
	begun, ended, lateRead [listSlots + 1]uint64
	begunAt                [listSlots + 1]time.Time
	testingOnlyListBound   atomic.Int64 // replaces listBound's connectTimeout if not zero

	mu         sync.Mutex
	lists      [listSlots]registry
	collisions map[string]bool   // front names another server or the proxy holds
	listed     map[string]string // tool name -> definition hash, as last recorded in a tools entry (nil: not yet)
	newer      newerTools        // the tools of the server's newer session (newertools.go)
	known      map[string]string // tool name -> the last definition hash listed, gone ones too (maxKnownTools)
	changes    []ToolChange      // definitions changed while the proxy ran
	// recording is closed when the last tools entry begun is durable (or
	// failed); nil before the first.
	recording chan struct{}

	kinds []lister // the four list kinds, in the order a sync reads them
}

// A registry is one list's registrations.
type registry struct {
	reg     map[string]registration // by front name (URI, URI template)
	skipped map[string]string       // server name -> why the front server refused it
}

// A registration is one item registered at the front.
type registration struct {
	name string // its name (URI, URI template) on the server
	def  string // its definition as the server listed it
	sum  string // definitionSum(def)
}

// paramHeaders reports whether front tool front's definition may bind
// arguments to HTTP headers (x-mcp-header, which the SDK's handler
// checks against a 2026-07-28 request's Mcp-Param-* headers), or is not
// registered.
func (c *catalogue) paramHeaders(front string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[toolSlot].reg[front]
	return !ok || strings.Contains(r.def, "x-mcp-header")
}

func newCatalogue(d *downstream) *catalogue {
	c := &catalogue{d: d, resync: make(chan struct{}, 1), collisions: map[string]bool{}, readNow: make(chan struct{}),
		kinds: []lister{toolKind(), promptKind(), resourceKind(), templateKind()}}
	for i := range c.lists {
		c.lists[i] = registry{reg: map[string]registration{}, skipped: map[string]string{}}
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
func (c *catalogue) triggerResync(slots ...listSlot) {
	for _, s := range slots {
		c.asked[s].Add(1)
		c.announced.Or(1 << s)
	}
	select {
	case c.resync <- struct{}{}:
	default:
	}
}

func (c *catalogue) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.resync:
		}
		wanted := c.wanted.Load() // a read begun clears its bit (begin)
		if cs := c.d.sup.current(); cs != nil {
			// Only what the server said changed, or a front client's list
			// asked for: reading the other lists too held up the front's
			// notification of the next change.
			c.sync(ctx, cs, c.announced.Load()|wanted)
		} else {
			c.unread(wanted &^ (1 << newerToolSlot))
		}
		if (c.announced.Load()|wanted)&(1<<newerToolSlot) != 0 {
			if cs := c.d.newer.current(); cs != nil {
				c.readNewerTools(ctx, cs)
			} else {
				c.unread(wanted & (1 << newerToolSlot))
			}
		}
	}
}

// syncAll reads all the server's lists and makes the front server's
// match, when the proxy connects to it; a changed server's new instance
// has started then (started).
func (c *catalogue) syncAll(ctx context.Context, cs *mcp.ClientSession) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.d.started(c.syncLocked(ctx, cs, 1<<listSlots-1))
}

// sync reads the server's lists in slots (a bit per listSlot) and makes
// the front server's match.
func (c *catalogue) sync(ctx context.Context, cs *mcp.ClientSession, slots uint32) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.syncLocked(ctx, cs, slots)
}

// errNotOffered is a list's sync when the server does not offer it.
var errNotOffered = errors.New("not offered")

// syncLocked is sync with c.syncMu held; it returns the slots whose
// lists were read and applied.
func (c *catalogue) syncLocked(ctx context.Context, cs *mcp.ClientSession, slots uint32) (applied uint32) {
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	sctx, cancel := context.WithTimeout(ctx, c.listBound())
	defer cancel()
	for _, l := range c.kinds {
		slot, _, _, _ := l.where()
		if slots&(1<<slot) == 0 {
			continue
		}
		switch err := l.sync(sctx, c, cs, caps); {
		case err == nil:
			applied |= 1 << slot
		case errors.Is(err, errNotOffered):
		case ctx.Err() == nil: // else the proxy is closing
			c.d.p.logger.Warn("proxy: listing "+l.plural()+" failed; the front offers the last list read", "server", c.d.cfg.ID, "error", err)
		}
	}
	return applied
}

// A lister is a listKind of any item type.
type lister interface {
	sync(ctx context.Context, c *catalogue, cs *mcp.ClientSession, caps *mcp.ServerCapabilities) error
	plural() string
	// where returns the list's slot, its front names' table, the list
	// result's field and its items' name (or URI) member.
	where() (slot listSlot, names nameTable, key, nameKey string)
}

// A listKind is one of the lists a server offers, whose items (of SDK
// type T) the catalogue registers at the front.
type listKind[T any] struct {
	slot    listSlot
	names   nameTable
	noun    string // "tool", in log lines
	key     string // the list result's field
	nameKey string // the definition's name field
	logKey  string // the log-line key of an item's name
	offered func(*mcp.ServerCapabilities) bool
	// page reads one page of the list, as typed items.
	page   func(ctx context.Context, cs *mcp.ClientSession, cursor string) (next string, items any, err error)
	prefix func(cfg *ServerConfig) string // the front prefix of the server's names
	decode func(raw json.RawMessage) (*T, error)
	name   func(*T) *string // the item's name (URI, URI template)
	// reserved reports front names the proxy keeps for itself.
	reserved func(p *Proxy, front string) bool
	// add registers item at the front as front, server name name.
	add    func(d *downstream, item *T, front, name string)
	remove func(s *mcp.Server, fronts ...string)
	// listed sees the list as read, before it is registered.
	listed func(c *catalogue, raws []json.RawMessage)
}

func (k *listKind[T]) plural() string { return k.noun + "s" }
func (k *listKind[T]) where() (listSlot, nameTable, string, string) {
	return k.slot, k.names, k.key, k.nameKey
}

func (k *listKind[T]) sync(ctx context.Context, c *catalogue, cs *mcp.ClientSession, caps *mcp.ServerCapabilities) error {
	announced := c.announced.And(^uint32(1<<k.slot))&(1<<k.slot) != 0
	// The changes announced before the list is asked for are in it; a
	// call waiting for them goes on when it is applied, or has failed.
	asked := c.begin(k.slot)
	defer c.readTo(k.slot, asked)
	if !k.offered(caps) {
		return errNotOffered
	}
	raws, err := k.list(ctx, cs)
	if err != nil {
		if announced { // the next read owes the clients the notification
			c.announced.Or(1 << k.slot)
		}
		return err
	}
	k.apply(c, raws, announced)
	return nil
}

// list pages through the server's list and returns its items as the
// server sent them (see capture.go).
func (k *listKind[T]) list(ctx context.Context, cs *mcp.ClientSession) ([]json.RawMessage, error) {
	var items []json.RawMessage
	cursor := ""
	seen := map[string]int{} // cursor -> the page that gave it
	for n := range 1000 {
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
		if next == "" {
			return items, nil
		}
		if at, ok := seen[next]; ok {
			return nil, fmt.Errorf("listing %s: page %d gave nextCursor %.64q, as page %d did: the server's pages go round in a loop", k.key, n+1, next, at)
		}
		seen[next], cursor = n+1, next
	}
	return nil, fmt.Errorf("listing %s: more than 1000 pages", k.key)
}

// apply makes the front server's registrations of c's server match raws,
// the list as the server sent it: what is new or changed is (re)added
// under its front name, what is gone is removed, what the front server
// refuses is skipped and reported once, and a name another server holds
// is left to it. When the server announced a change (announced) and
// none shows, one unchanged item is registered again, so the front's
// clients hear of the change as they would from the server directly.
func (k *listKind[T]) apply(c *catalogue, raws []json.RawMessage, announced bool) {
	d := c.d
	if k.listed != nil {
		k.listed(c, raws)
	}
	prefix := k.prefix(&d.cfg)
	want := map[string]bool{}
	skipped := map[string]string{}
	changed := false
	var again func()          // re-registers one unchanged item
	seen := map[string]bool{} // names listed so far
	for _, raw := range raws {
		item, err := k.decode(raw)
		name := ""
		if err == nil {
			name = *k.name(item)
		} else {
			name = nameOf(raw, k.nameKey)
		}
		if name == "" {
			d.p.logger.Warn("proxy: skipping a "+k.noun+" that is not a JSON object with a "+k.nameKey, "server", d.cfg.ID)
			continue
		}
		if seen[name] {
			// Which one the server acts on is its own affair; the front
			// offers, and a tools entry holds, the last.
			d.p.logger.Warn("proxy: the server lists a "+k.noun+" more than once; the last definition listed is the one offered and recorded", "server", d.cfg.ID, k.logKey, name)
		}
		seen[name] = true
		if err != nil {
			skipped[name] = err.Error()
			continue
		}
		front := prefix + name
		*k.name(item) = front
		if !c.claim(k.names, front, k.reserved != nil && k.reserved(d.p, front)) {
			continue
		}
		if c.unchanged(k.slot, front, raw) {
			want[front] = true
			again = func() { k.add(d, item, front, name) }
			continue
		}
		changed = true
		if err := addGuarded(func() { k.add(d, item, front, name) }); err != nil {
			d.p.router.free(k.names, front, d)
			skipped[name] = err.Error()
			continue
		}
		want[front] = true
		c.mu.Lock()
		c.lists[k.slot].reg[front] = registration{name: name, def: string(raw), sum: definitionSum(raw)}
		c.mu.Unlock()
	}
	c.mu.Lock()
	fresh := c.lists[k.slot].skipped
	c.lists[k.slot].skipped = skipped
	var gone []string
	for front := range c.lists[k.slot].reg {
		if !want[front] {
			gone = append(gone, front)
			delete(c.lists[k.slot].reg, front)
		}
	}
	c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(skipped)) {
		if _, known := fresh[name]; !known {
			d.p.logger.Warn("proxy: skipping a "+k.noun+" the SDK rejects", "server", d.cfg.ID, k.logKey, name, "error", skipped[name])
		}
	}
	if announced && !changed && len(gone) == 0 && again != nil {
		addGuarded(again) // it was added once, so it is added again
	}
	if len(gone) > 0 {
		k.remove(d.p.server, gone...)
		for _, f := range gone {
			d.p.router.free(k.names, f, d)
		}
	}
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
// so a re-sync does not re-add it (which would notify every client).
func (c *catalogue) unchanged(slot listSlot, front string, raw json.RawMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.lists[slot].reg[front]
	return ok && r.def == string(raw)
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
func (c *catalogue) report(h map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h["tools"] = len(c.lists[toolSlot].reg)
	if s := c.lists[toolSlot].skipped; len(s) > 0 {
		out := map[string]any{}
		for k, v := range s {
			out[k] = v
		}
		h["skipped_tools"] = out
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

// decodeAs decodes a definition as the SDK's type.
func decodeAs[T any](raw json.RawMessage) (*T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// toolKind describes the tools list.
func toolKind() *listKind[mcp.Tool] {
	return &listKind[mcp.Tool]{
		slot: toolSlot, names: toolNames, noun: "tool", key: "tools", nameKey: "name", logKey: "tool",
		offered: func(c *mcp.ServerCapabilities) bool { return c.Tools != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) (string, any, error) {
			r, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return "", nil, err
			}
			return r.NextCursor, r.Tools, nil
		},
		prefix:   (*ServerConfig).toolPrefix,
		decode:   decodeTool,
		name:     func(t *mcp.Tool) *string { return &t.Name },
		reserved: (*Proxy).reservedTool,
		add: func(d *downstream, t *mcp.Tool, front, name string) {
			d.p.server.AddTool(t, d.toolHandler(front, name))
		},
		remove: (*mcp.Server).RemoveTools,
		listed: (*catalogue).recordTools,
	}
}

// promptKind describes the prompts list.
func promptKind() *listKind[mcp.Prompt] {
	return &listKind[mcp.Prompt]{
		slot: promptSlot, names: promptNames, noun: "prompt", key: "prompts", nameKey: "name", logKey: "prompt",
		offered: func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) (string, any, error) {
			r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return "", nil, err
			}
			return r.NextCursor, r.Prompts, nil
		},
		prefix: (*ServerConfig).toolPrefix,
		decode: decodeAs[mcp.Prompt],
		name:   func(p *mcp.Prompt) *string { return &p.Name },
		add: func(d *downstream, p *mcp.Prompt, _, name string) {
			d.p.server.AddPrompt(p, d.promptHandler(name))
		},
		remove: (*mcp.Server).RemovePrompts,
	}
}

// resourceKind describes the resources list.
func resourceKind() *listKind[mcp.Resource] {
	return &listKind[mcp.Resource]{
		slot: resourceSlot, names: resourceNames, noun: "resource", key: "resources", nameKey: "uri", logKey: "uri",
		offered: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) (string, any, error) {
			r, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return "", nil, err
			}
			return r.NextCursor, r.Resources, nil
		},
		prefix: (*ServerConfig).uriPrefix,
		decode: decodeAs[mcp.Resource],
		name:   func(r *mcp.Resource) *string { return &r.URI },
		add: func(d *downstream, r *mcp.Resource, _, _ string) {
			d.p.server.AddResource(r, d.readResource)
		},
		remove: (*mcp.Server).RemoveResources,
	}
}

// templateKind describes the resource templates list.
func templateKind() *listKind[mcp.ResourceTemplate] {
	return &listKind[mcp.ResourceTemplate]{
		slot: templateSlot, names: resourceNames, noun: "resource template", key: "resourceTemplates", nameKey: "uriTemplate", logKey: "uri_template",
		offered: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil },
		page: func(ctx context.Context, cs *mcp.ClientSession, cursor string) (string, any, error) {
			r, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return "", nil, err
			}
			return r.NextCursor, r.ResourceTemplates, nil
		},
		prefix: (*ServerConfig).uriPrefix,
		decode: decodeAs[mcp.ResourceTemplate],
		name:   func(t *mcp.ResourceTemplate) *string { return &t.URITemplate },
		add: func(d *downstream, t *mcp.ResourceTemplate, _, _ string) {
			d.p.server.AddResourceTemplate(t, d.readResource)
		},
		remove: (*mcp.Server).RemoveResourceTemplates,
	}
}

// decodeTool decodes a tool definition, keeping its schemas exactly as
// the server gave them.
func decodeTool(raw json.RawMessage) (*mcp.Tool, error) {
	t, err := decodeAs[mcp.Tool](raw)
	if err != nil {
		return nil, err
	}
	var schemas struct {
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(raw, &schemas); err != nil {
		return nil, err
	}
	t.InputSchema, t.OutputSchema = nil, nil
	if len(schemas.InputSchema) > 0 && string(schemas.InputSchema) != "null" {
		t.InputSchema = schemas.InputSchema
	}
	if len(schemas.OutputSchema) > 0 && string(schemas.OutputSchema) != "null" {
		t.OutputSchema = schemas.OutputSchema
	}
	return t, nil
}

// rawLists is the SDK front's middleware that has the four lists
// (tools, prompts, resources, resource templates) answered with each
// downstream item as its server listed it, under its front name or URI
// (the only member the proxy changes): for a tool the definition
// whose hash a call entry records (tool_sha256), rather than the SDK's
// encoding of its decoding, which drops the members its types lack. The
// list's envelope (paging, cache hints, and the proxy's own and the task
// tools) stays the SDK's.
func (p *Proxy) rawLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p.freshLists(ctx, freshSlots(req.GetParams()))
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		var raw json.RawMessage
		var rerr error
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			raw, rerr = p.rawList(r, toolKind(), len(r.Tools), func(i int) (string, any) { return r.Tools[i].Name, r.Tools[i] })
		case *mcp.ListPromptsResult:
			raw, rerr = p.rawList(r, promptKind(), len(r.Prompts), func(i int) (string, any) { return r.Prompts[i].Name, r.Prompts[i] })
		case *mcp.ListResourcesResult:
			raw, rerr = p.rawList(r, resourceKind(), len(r.Resources), func(i int) (string, any) { return r.Resources[i].URI, r.Resources[i] })
		case *mcp.ListResourceTemplatesResult:
			raw, rerr = p.rawList(r, templateKind(), len(r.ResourceTemplates), func(i int) (string, any) {
				return r.ResourceTemplates[i].URITemplate, r.ResourceTemplates[i]
			})
		default:
			return res, nil
		}
		if rerr != nil {
			return res, nil // not expected: the SDK's encoding, as before
		}
		protocol := ""
		if pr, ok := req.(interface{ ProtocolVersion() string }); ok {
			protocol = pr.ProtocolVersion()
		}
		return &rawResult{Result: res, raw: withProtocolResultType(raw, protocol)}, nil
	}
}

// rawList is the list result res with its n items of kind k (item(i):
// the front name or URI and the SDK's value), each downstream one as its
// server listed it.
func (p *Proxy) rawList(res any, k lister, n int, item func(int) (string, any)) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	slot, names, key, nameKey := k.where()
	items := make([]json.RawMessage, n)
	for i := range items {
		front, v := item(i)
		if items[i] = p.frontDefinition(slot, names, nameKey, front); items[i] == nil {
			if items[i], err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
	}
	if env[key], err = json.Marshal(items); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// frontDefinition is the definition of the item registered as front in
// slot as its server listed it, with front as its nameKey member; nil if
// it is not a downstream's.
func (p *Proxy) frontDefinition(slot listSlot, names nameTable, nameKey, front string) json.RawMessage {
	d := p.router.owner(names, front)
	if d == nil {
		return nil
	}
	d.cat.mu.Lock()
	r, ok := d.cat.lists[slot].reg[front]
	d.cat.mu.Unlock()
	var m map[string]json.RawMessage
	if !ok || json.Unmarshal([]byte(r.def), &m) != nil || m == nil {
		return nil
	}
	name, err := json.Marshal(front)
	if err != nil {
		return nil
	}
	m[nameKey] = name
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return out
}
