package proxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The four lists a server offers, as the catalogue (catalogue.go) sees
// them: a listKind says what differs between them (where a list's items
// are kept, how a page is read, how an item is decoded, named and
// registered at the front); what is the same is listKind's methods.

// A lister is a listKind of any item type.
type lister interface {
	sync(ctx context.Context, c *catalogue, cs *mcp.ClientSession, caps *mcp.ServerCapabilities, slot listSlot, held bool) error
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
	// listed sees the list of session (firstSessionTools,
	// newerSessionTools) as read, before it is registered.
	listed func(c *catalogue, session int, raws []json.RawMessage)
}

func (k *listKind[T]) plural() string { return k.noun + "s" }
func (k *listKind[T]) where() (listSlot, nameTable, string, string) {
	return k.slot, k.names, k.key, k.nameKey
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
