package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// addHugeAfterReshape gives the fixture (run with fixtureEnv
// "listshuge") a tool "huge", described in a few words, whose definition
// is past maxFrontResult in the process "reshape" ran in, once it added
// "added": the newer session's definition of a tool the first session
// lists small.
func addHugeAfterReshape(s *mcp.Server, obj json.RawMessage) {
	s.AddTool(&mcp.Tool{Name: "huge", Description: "small", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "huge"}}}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil && slices.ContainsFunc(lt.Tools, func(t *mcp.Tool) bool { return t.Name == "added" }) {
				for i, tl := range lt.Tools {
					if tl.Name == "huge" {
						big := *tl
						big.Description = strings.Repeat("d", maxFrontResult-2000)
						lt.Tools[i] = &big
					}
				}
			}
			return res, err
		}
	})
}

// TestNewerListItemPastClientBound: a stdio server's newer session whose
// definition of a tool (huge) is past what a list page can give, where
// its first session lists it small. A 2026-07-28 client listing again and
// again is not given it, and keeps its session; a 2025-11-25 client is
// given the first session's; the log says so once, and provlog__status
// names it among the newer session's skipped_tools, with its size. The
// newer session's definitions were not checked where they are applied,
// only by rawList as each list was answered: a warning on every list,
// and provlog__status named nothing.
func TestNewerListItemPastClientBound(t *testing.T) {
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "listshuge"
	logs := &proctest.Buffer{}
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the proxy's log:\n%.3000s", logs.String())
		}
	})
	newer, older := reshapeNewer(t, p)
	ctx := context.Background()
	shown := 0
	for range 3 { // a client listing again and again
		tools, pages, largest, err := listPages(t, func(c string) (*mcp.ListToolsResult, error) {
			return newer.ListTools(ctx, &mcp.ListToolsParams{Cursor: c})
		}, func(r *mcp.ListToolsResult) ([]string, string) {
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
			}
			return names, r.NextCursor
		}, "fx__")
		t.Logf("2026-07-28 client: %d tools in %d pages, the largest %d bytes; %v", len(tools), pages, largest, err)
		if err != nil || tools["fx__huge"] != 0 || tools["fx__added"] != 1 || largest > maxFrontResult {
			t.Errorf("2026-07-28 client: %v, %.200v; want fx__added and not fx__huge, in pages within %d bytes", tools, err, maxFrontResult)
		}
		shown = len(tools)
	}
	if _, err := newer.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"}); err != nil {
		t.Errorf("the 2026-07-28 client's session after the lists: %v; want it kept", err)
	}
	if def, ok := frontTools(t, older)["fx__huge"]; !ok || len(def) > 1<<10 {
		t.Errorf("the 2025-11-25 client is given fx__huge: %v, %d bytes; want the first session's, small", ok, len(def))
	}
	warned := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "huge") && strings.Contains(line, "bytes") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the log names the huge tool in %d lines after the 2026-07-28 client listed again and again; want 1 (once per change of the list):\n%.2000s", warned, logs.String())
	}
	st := serverStatus(t, callStatus(t, older), "fx")
	ns, _ := st["newer_session"].(map[string]any)
	skipped, _ := ns["skipped_tools"].(map[string]any)
	why, _ := skipped["huge"].(string)
	t.Logf("provlog__status newer session: tools %v, skipped_tools %v", ns["tools"], skipped)
	if n, _ := ns["tools"].(float64); int(n) != shown {
		t.Errorf("provlog__status: the newer session's tools %v; want %d, as the 2026-07-28 client is shown", ns["tools"], shown)
	}
	if !strings.Contains(why, "its definition is ") || !strings.Contains(why, " bytes, past the ") {
		t.Errorf("provlog__status: the newer session's skipped_tools %v; want huge, its size said", skipped)
	}
	if first, _ := st["skipped_tools"].(map[string]any); first["huge"] != nil {
		t.Errorf("provlog__status: skipped_tools %v; want huge skipped from the newer session's list only", first)
	}
}
