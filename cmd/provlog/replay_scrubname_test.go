package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy"
	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayScrubbedToolName: a server names a tool after a value its
// actor sent under a redacted field (login's token), so the proxy records
// the call's tool name with that value cut out ("get_[redacted]"). Replay
// must say the call cannot be replayed because its tool's name was
// redacted: not that the tool is gone (no longer listed: a changed
// definition, which fails the run), since the server lists it still under
// the name the record does not hold.
func TestReplayScrubbedToolName(t *testing.T) {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv := mcp.NewServer(&mcp.Implementation{Name: "named-after", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "login", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("logged in"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "get_" + scrubSecret, Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("got it"), nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	data, cfgPath, first := recordScrubCalls(t, &scrubFixture{url: ts.URL}, "hash",
		&mcp.CallToolParams{Name: "fx__get_" + scrubSecret, Arguments: map[string]any{"q": "x"}})
	if tool, _ := entryAt(t, data, first).Fields["tool"].(string); tool != "get_"+proxy.Redacted {
		t.Fatalf("the call's tool is recorded as %q, want it scrubbed of the secret", tool)
	}
	rep := replayJSON(t, data, cfgPath, first, first+2)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	o := rep.Outcomes[0]
	if o.Class != replay.NotReplayable || o.Definition == replay.DefinitionGone || !strings.Contains(o.Reason, "redacted") {
		t.Errorf("a call whose tool name was recorded scrubbed: %s, definition %s (%s); want not replayable because the name was redacted, not gone", o.Class, o.Definition, o.Reason)
	}
}
