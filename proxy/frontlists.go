package proxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The front's answers to its clients' lists: the servers' lists read
// first (fresh.go), then each downstream item given as its server listed
// it (the catalogue's registration), not as the SDK re-encodes it.

// rawLists is the SDK front's middleware that has the four lists
// (tools, prompts, resources, resource templates) answered with each
// downstream item as its server listed it, under its front name or URI
// (the only member the proxy changes): for a tool the definition
// whose hash a call entry records (tool_sha256), rather than the SDK's
// encoding of its decoding, which drops the members its types lack. The
// list's envelope (paging, cache hints, and the proxy's own and the task
// tools) stays the SDK's. A 2026-07-28 client is shown a stdio server's
// items as its newer session listed them, and another client not those
// only that session lists (newertools.go).
func (p *Proxy) rawLists(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p.freshLists(ctx, freshSlots(req.GetParams()))
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		protocol := ""
		if pr, ok := req.(interface{ ProtocolVersion() string }); ok {
			protocol = pr.ProtocolVersion()
		}
		newer := protocol >= statelessProtocol
		var raw json.RawMessage
		var rerr error
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			raw, rerr = p.rawList(r, toolKind(), newer, len(r.Tools), func(i int) (string, any) { return r.Tools[i].Name, r.Tools[i] })
		case *mcp.ListPromptsResult:
			raw, rerr = p.rawList(r, promptKind(), newer, len(r.Prompts), func(i int) (string, any) { return r.Prompts[i].Name, r.Prompts[i] })
		case *mcp.ListResourcesResult:
			raw, rerr = p.rawList(r, resourceKind(), newer, len(r.Resources), func(i int) (string, any) { return r.Resources[i].URI, r.Resources[i] })
		case *mcp.ListResourceTemplatesResult:
			raw, rerr = p.rawList(r, templateKind(), newer, len(r.ResourceTemplates), func(i int) (string, any) {
				return r.ResourceTemplates[i].URITemplate, r.ResourceTemplates[i]
			})
		default:
			return res, nil
		}
		if rerr != nil {
			return res, nil // not expected: the SDK's encoding, as before
		}
		return &rawResult{Result: res, raw: withProtocolResultType(raw, protocol)}, nil
	}
}

// rawList is the list result res with its n items of kind k (item(i):
// the front name or URI and the SDK's value), each downstream one as its
// server listed it (its newer session, for a 2026-07-28 client: newer,
// who is not shown the items that session no longer lists).
func (p *Proxy) rawList(res any, k lister, newer bool, n int, item func(int) (string, any)) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	slot, names, key, nameKey := k.where()
	items := make([]json.RawMessage, 0, n)
	for i := range n {
		front, v := item(i)
		def, shown := p.frontDefinition(slot, names, nameKey, front, newer)
		if def == nil && shown {
			if def, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		if shown {
			items = append(items, def)
		}
	}
	if env[key], err = json.Marshal(items); err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// frontDefinition is the definition of the item registered as front in
// slot as its server listed it (its newer session, if up and newer), with
// front as its nameKey member; nil if it is not a downstream's. It
// reports false if the item is not to be shown: its newer session does
// not list it (for newer), or only that session does (for another, or
// while it is down).
func (p *Proxy) frontDefinition(slot listSlot, names nameTable, nameKey, front string, newer bool) (json.RawMessage, bool) {
	d := p.router.owner(names, front)
	if d == nil {
		return nil, true
	}
	def, shown := d.cat.shownDefinition(slot, front, newer)
	var m map[string]json.RawMessage
	if !shown || def == nil || json.Unmarshal(def, &m) != nil || m == nil {
		return nil, shown
	}
	name, err := json.Marshal(front)
	if err != nil {
		return nil, true
	}
	m[nameKey] = name
	out, err := json.Marshal(m)
	if err != nil {
		return nil, true
	}
	return out, true
}
