package proxy

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// The proxy's own tools. They answer questions about the log and are not
// recorded.
const (
	ownPrefix  = "provlog__"
	toolStatus = ownPrefix + "status"
	toolProve  = ownPrefix + "prove"
	toolVerify = ownPrefix + "verify"
)

func isOwnTool(name string) bool {
	return name == toolStatus || name == toolProve || name == toolVerify
}

// reservedTool reports whether name is kept from downstream servers: the
// proxy's own tools, and those the program adds to the front server
// itself (Options.ReservedTools). A server offering one under an empty
// prefix is refused at start and skipped on a resync; before, it took
// over create_task and the other task tools.
func (p *Proxy) reservedTool(name string) bool {
	return isOwnTool(name) || slices.Contains(p.opts.ReservedTools, name)
}

func (p *Proxy) addOwnTools() {
	p.server.AddTool(ownTool(toolStatus, "provlog status",
		"The audit log's state (size, last checkpoint, anchoring and witnesses) and the health of every downstream MCP server. Not recorded.",
		`{"type":"object","properties":{},"additionalProperties":false}`), p.status)
	if p.opts.Prove != nil {
		p.server.AddTool(ownTool(toolProve, "provlog prove",
			"A receipt (c2sp.org/tlog-proof) proving that a log entry, given by its index or its leaf hash, is in the log. Not recorded.",
			`{"type":"object","properties":{`+
				`"index":{"type":"integer","minimum":0,"description":"the entry's index in the log"},`+
				`"leaf_hash":{"type":"string","description":"the entry's RFC 6962 leaf hash, hex or base64"}},`+
				`"additionalProperties":false}`), p.prove)
	}
	if p.opts.Verifier != nil {
		p.server.AddTool(ownTool(toolVerify, "provlog verify",
			"Checks a receipt against this log's key: its checkpoint signature and its inclusion proof, for the entry given as its exact text or its leaf hash (else the receipt's own extra line). Not recorded.",
			`{"type":"object","properties":{`+
				`"receipt":{"type":"string","description":"the receipt text, as in _meta[\"dev.provlog/receipt\"]"},`+
				`"entry":{"type":"string","description":"the entry's exact bytes as text"},`+
				`"leaf_hash":{"type":"string","description":"the entry's leaf hash, hex or base64"}},`+
				`"required":["receipt"],"additionalProperties":false}`), p.verify)
	}
}

// ownTool describes one of provlog's own tools: each reads the log only,
// the same answer every time, and reaches nothing outside the sidecar.
func ownTool(name, title, desc, inputSchema string) *mcp.Tool {
	return &mcp.Tool{
		Name:        name,
		Title:       title,
		Description: desc,
		InputSchema: json.RawMessage(inputSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	}
}

// jsonResult answers with v as structured content and as JSON text.
func jsonResult(v map[string]any) *mcp.CallToolResult {
	b, _ := json.MarshalIndent(v, "", "  ")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
}

// toolError answers with a tool error the model can read and act on.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func (p *Proxy) status(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var servers []any
	for _, d := range p.downstreams() {
		servers = append(servers, d.health())
	}
	out := map[string]any{"servers": servers}
	if servers == nil {
		out["servers"] = []any{}
	}
	if p.opts.Status != nil {
		out["log"] = p.opts.Status(ctx)
	}
	return jsonResult(out), nil
}

func (p *Proxy) prove(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Index    *int64 `json:"index"`
		LeafHash string `json:"leaf_hash"`
	}
	if err := unmarshalArgs(req.Params.Arguments, &in); err != nil {
		return toolError("provlog__prove: %v", err), nil
	}
	index := int64(-1)
	var leaf []byte
	switch {
	case in.Index != nil && in.LeafHash != "":
		return toolError("provlog__prove: give index or leaf_hash, not both"), nil
	case in.Index != nil:
		if *in.Index < 0 {
			return toolError("provlog__prove: index must not be negative"), nil
		}
		index = *in.Index
	case in.LeafHash != "":
		var err error
		if leaf, err = decodeHash(in.LeafHash); err != nil {
			return toolError("provlog__prove: leaf_hash: %v", err), nil
		}
	default:
		return toolError("provlog__prove: give index or leaf_hash"), nil
	}
	r, err := p.opts.Prove(ctx, index, leaf)
	if err != nil {
		return toolError("provlog__prove: %v", err), nil
	}
	res := jsonResult(map[string]any{"index": r.Index, "receipt": r.String()})
	return res, nil
}

func (p *Proxy) verify(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Receipt  string `json:"receipt"`
		Entry    string `json:"entry"`
		LeafHash string `json:"leaf_hash"`
	}
	if err := unmarshalArgs(req.Params.Arguments, &in); err != nil {
		return toolError("provlog__verify: %v", err), nil
	}
	r, err := log.ParseReceipt([]byte(in.Receipt))
	if err != nil {
		return jsonResult(map[string]any{"valid": false, "error": err.Error()}), nil
	}
	var leaf []byte
	basis := "entry"
	switch {
	case in.Entry != "" && in.LeafHash != "":
		return toolError("provlog__verify: give entry or leaf_hash, not both"), nil
	case in.Entry != "":
		leaf = log.LeafHash([]byte(in.Entry))
	case in.LeafHash != "":
		if leaf, err = decodeHash(in.LeafHash); err != nil {
			return toolError("provlog__verify: leaf_hash: %v", err), nil
		}
		basis = "leaf_hash"
	case r.Extra != nil:
		// The extra line is not authenticated by itself; verifying
		// against it proves that some entry with this leaf hash is in
		// the log, which is what we report.
		leaf, basis = r.Extra, "receipt_extra_line"
	default:
		return toolError("provlog__verify: the receipt names no leaf hash; give entry or leaf_hash"), nil
	}
	cp, err := r.Verify(leaf, p.opts.Verifier)
	if err != nil {
		return jsonResult(map[string]any{"valid": false, "error": err.Error(), "index": r.Index, "leaf_hash": hex.EncodeToString(leaf)}), nil
	}
	return jsonResult(map[string]any{
		"valid":     true,
		"index":     r.Index,
		"leaf_hash": hex.EncodeToString(leaf),
		"checked":   basis,
		"checkpoint": map[string]any{
			"origin": cp.Origin,
			"size":   cp.Size,
			"root":   base64.StdEncoding.EncodeToString(cp.Hash),
		},
	}), nil
}

func unmarshalArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	return nil
}

func decodeHash(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == log.HashSize {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == log.HashSize {
		return b, nil
	}
	return nil, fmt.Errorf("want %d bytes as hex or base64", log.HashSize)
}
