package proxy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMetaValueCutFromArgs: a value a call's _meta holds under a member
// the redact list names, sent again in an argument the list does not
// name, is cut out of the call's entry, as a named argument's value sent
// again is. The _meta's values were remembered only after the arguments
// were recorded, so its own call's entry held it (a later call's did not).
func TestMetaValueCutFromArgs(t *testing.T) {
	const secret = "sk-MetaOnce/77+Qx"
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "note", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted"}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "mn", URL: down.URL, Redact: []string{"token"}}}, nil)
	cs := connectMemory(t, p, nil)
	before := l.size(t)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mn__note", Arguments: map[string]any{"note": secret}, Meta: mcp.Meta{"token": secret}}); err != nil {
		t.Fatal(err)
	}
	for i := before; i < l.size(t); i++ {
		if b := l.entry(t, i); bytes.Contains(b, []byte(secret)) {
			t.Errorf("entry %d holds the _meta's value: %s", i, b)
		}
	}
}
