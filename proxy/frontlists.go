package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"fmt"

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
		var raw json.RawMessage
		var rerr error
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			raw, rerr = p.rawList(r, toolKind(), protocol, len(r.Tools), func(i int) (string, any) { return r.Tools[i].Name, r.Tools[i] })
		case *mcp.ListPromptsResult:
			raw, rerr = p.rawList(r, promptKind(), protocol, len(r.Prompts), func(i int) (string, any) { return r.Prompts[i].Name, r.Prompts[i] })
		case *mcp.ListResourcesResult:
			raw, rerr = p.rawList(r, resourceKind(), protocol, len(r.Resources), func(i int) (string, any) { return r.Resources[i].URI, r.Resources[i] })
		case *mcp.ListResourceTemplatesResult:
			raw, rerr = p.rawList(r, templateKind(), protocol, len(r.ResourceTemplates), func(i int) (string, any) {
				return r.ResourceTemplates[i].URITemplate, r.ResourceTemplates[i]
			})
		default:
			return res, nil
		}
		if rerr != nil {
			return res, nil // not expected: the SDK's encoding, as before
		}
		return &rawResult{Result: res, raw: raw}, nil
	}
}

// rawList is the list result res with its n items of kind k (item(i):
// the front name or URI, which the SDK's cursor names, and the SDK's
// value), each downstream one as its server listed it (its newer
// session, for a 2026-07-28 client, who is not shown the items that
// session no longer lists), as a client of protocol gets it.
//
// The SDK's front pages by count (1,000 items), not by bytes: a page of
// items described at length was past what a go-sdk client takes in one
// message (1,000 tools of 17,000 bytes: 17 MB), and the client lost its
// session. A page past maxFrontResult is cut after the last item that
// fits, and its nextCursor names that item, as the SDK's own does, so
// the next page starts after it.
func (p *Proxy) rawList(res any, k lister, protocol string, n int, item func(int) (string, any)) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	slot, names, key, nameKey := k.where()
	newer := protocol >= statelessProtocol
	items := make([]json.RawMessage, 0, n)
	at := make([]int, 0, n) // the SDK's index of each item shown
	for i := range n {
		front, v := item(i)
		def, shown := p.frontDefinition(slot, names, nameKey, front, newer)
		if def == nil && shown {
			if def, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		if shown {
			items, at = append(items, def), append(at, i)
		}
	}
	out, err := listPage(env, key, items, protocol)
	if err != nil || len(out) <= maxFrontResult {
		return out, err
	}
	if len(items) == 0 {
		return out, nil // not expected: the SDK's envelope alone
	}
	// Past the bound: the items that fit, less room for the cursor.
	room := maxFrontResult - (len(out) - len(env[key]))
	keep, size := 0, 2 // []
	for _, it := range items {
		if size += len(it) + 1; size > room-cursorRoom {
			break
		}
		keep++
	}
	for {
		// Cut after item keep-1 or, if the first alone is past the
		// bound, after the first, which is not given. The catalogue
		// shows no item past maxListItem, the first session's or the
		// newer's (apply, which reports it once, in provlog__status
		// too), so the first is past it only while a newer session's
		// list just read is being applied.
		uid, _ := item(at[max(keep, 1)-1])
		cursor, err := frontCursor(uid)
		if err != nil {
			return nil, err
		}
		if env["nextCursor"], err = json.Marshal(cursor); err != nil {
			return nil, err
		}
		if out, err = listPage(env, key, items[:keep], protocol); err != nil || len(out) <= maxFrontResult || keep == 0 {
			return out, err
		}
		for over := len(out) - maxFrontResult; over > 0 && keep > 0; keep-- {
			over -= len(items[keep-1]) + 1
		}
	}
}

// cursorRoom is what rawList keeps for the nextCursor of a page it cuts:
// the SDK's cursor of a name of up to some 12,000 bytes.
const cursorRoom = 16 << 10

// maxListItem bounds an item's definition as a client is given it in a
// list (frontItem): what a page of maxFrontResult holds beside the
// list's envelope (the SDK's nextCursor, up to cursorRoom, and 1 KiB
// for the rest) and the cursor rawList gives it. The catalogue does not
// offer an item past it (applyItem): it could be given in no page.
const maxListItem = maxFrontResult - 2*cursorRoom - 1<<10

// listItemSize is the size of raw, an item as its server listed it, as a
// client is given it under the name front (frontItem), when it may be
// past maxListItem; 0 when it cannot be (a byte of JSON is at most 6 as
// frontItem encodes it), so a list of items of usual sizes is not
// encoded again to be applied.
func listItemSize(raw json.RawMessage, nameKey, front string) int {
	if 6*(len(raw)+len(nameKey)+len(front)+8) <= maxListItem {
		return 0
	}
	return len(frontItem(raw, nameKey, front))
}

// pastList says why raw, the definition of the item name of cfg's
// server, could be given in no list page (maxListItem); "" if it could.
func (k *listKind[T]) pastList(cfg *ServerConfig, raw json.RawMessage, name string) string {
	if n := listItemSize(raw, k.nameKey, k.prefix(cfg)+name); n > maxListItem {
		return fmt.Sprintf("its definition is %d bytes, past the %d a client takes of one item in a list page (%d in one message)", n, maxListItem, maxFrontResult)
	}
	return ""
}

// listPage is a list result: the envelope env with items as its member
// key, as a client of protocol gets it.
func listPage(env map[string]json.RawMessage, key string, items []json.RawMessage, protocol string) (json.RawMessage, error) {
	var err error
	if env[key], err = json.Marshal(items); err != nil {
		return nil, err
	}
	out, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	return withProtocolResultType(out, protocol), nil
}

// frontCursor is the cursor the SDK's front gives a page that ends with
// the item uid (its name, URI or URI template): go-sdk's pageToken,
// gob-encoded, in base64 (encodeCursor in its server.go), which its
// front decodes to list what comes after that item.
func frontCursor(uid string) (string, error) {
	type pageToken struct{ LastUID string }
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(pageToken{LastUID: uid}); err != nil {
		return "", fmt.Errorf("encoding a list cursor: %w", err)
	}
	return base64.URLEncoding.EncodeToString(b.Bytes()), nil
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
	if !shown || def == nil {
		return nil, shown
	}
	return frontItem(def, nameKey, front), true
}

// frontItem is def, an item as its server listed it, as a client is
// given it: with front as its nameKey member; nil if def is not a JSON
// object.
func frontItem(def json.RawMessage, nameKey, front string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(def, &m) != nil || m == nil {
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
