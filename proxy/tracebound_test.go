package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTracesBoundClientText: what a client names in a request (a tool,
// a resource URI, a prompt no server has) goes into its span's name and
// attributes bounded, so that no client's request makes a span, or the
// export batch it shares with every other actor's spans, as large as it
// likes (a receiver refuses a batch too large, and the other spans are
// lost with it).
func TestTracesBoundClientText(t *testing.T) {
	l := newTestLog(t)
	p, sr := tracedProxy(t, l)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	long := strings.Repeat("x", 100_000)
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "down__" + long})
	cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "nowhere://" + long})
	cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "down__" + long})
	spans := sr.Ended()
	if len(spans) < 3 {
		t.Fatalf("%d spans, want one per request", len(spans))
	}
	for _, s := range spans {
		if len(s.Name()) > maxSpanText+len("resources/read ") {
			t.Errorf("a span's name is %d bytes", len(s.Name()))
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); len(v) > maxSpanText {
				t.Errorf("span %.40s: %s is %d bytes", s.Name(), kv.Key, len(v))
			}
		}
	}
}
