package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// manyBigServer is a go-sdk server of n tools and n resources, each
// described in desc bytes, that pages its lists at 400 items a page
// (some 6.8 MB a page for desc 17,000): a go-sdk client lists them all.
func manyBigServer(t *testing.T, n, desc int) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, &mcp.ServerOptions{PageSize: 400})
	d := strings.Repeat("d", desc)
	for i := range n {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%04d", i), Description: d, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		srv.AddResource(&mcp.Resource{Name: fmt.Sprintf("r%04d", i), URI: fmt.Sprintf("file:///r%04d", i), Description: d},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{}, nil
			})
	}
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	return down.URL
}

// listPages pages through a list of cs (page: one page, from a cursor)
// and returns the names of its items with the prefix, each counted, the
// pages and the bytes of the largest as the SDK encodes it.
func listPages[R any](t *testing.T, page func(cursor string) (R, error), items func(R) ([]string, string), prefix string) (names map[string]int, pages, largest int, err error) {
	t.Helper()
	names = map[string]int{}
	cursor := ""
	for {
		res, err := page(cursor)
		if err != nil {
			return names, pages, largest, err
		}
		pages++
		if b, _ := json.Marshal(res); len(b) > largest {
			largest = len(b)
		}
		list, next := items(res)
		for _, n := range list {
			if strings.HasPrefix(n, prefix) {
				names[n]++
			}
		}
		if next == "" {
			return names, pages, largest, nil
		}
		if pages > 100 {
			return names, pages, largest, fmt.Errorf("more than 100 pages")
		}
		cursor = next
	}
}

// TestListPastClientBound: a server of 1,000 tools and 1,000 resources,
// 17,000-byte descriptions each, pages its lists at 400 items; a go-sdk
// client lists every one straight from it. Through provlog, on the stdio
// and the HTTP front, a go-sdk client that takes at most 16 MiB a
// message must get every item exactly once, in pages each within
// maxFrontResult, and keep its session; a client with no bound gets the
// same items.
func TestListPastClientBound(t *testing.T) {
	const n = 1000
	url := manyBigServer(t, n, 17_000)
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxEventSize: mcp.DefaultMaxEventSize}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got := 0
	for _, err := range direct.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing straight from the server: %v", err)
		}
		got++
	}
	if got != n {
		t.Fatalf("straight from the server: %d tools; want %d", got, n)
	}

	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "b", URL: url}}, nil)
	for _, front := range append(bothFronts(t, p),
		testFront{"http, no bound", func() *mcp.ClientSession {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "unbounded", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serveHTTP(t, p),
				HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}}) {
		cs := front.cs()
		tools, pages, largest, err := listPages(t, func(c string) (*mcp.ListToolsResult, error) {
			return cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: c})
		}, func(r *mcp.ListToolsResult) ([]string, string) {
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
			}
			return names, r.NextCursor
		}, "b__")
		t.Logf("%s front, tools/list: %d tools in %d pages, the largest %d bytes; %v", front.name, len(tools), pages, largest, err)
		checkListed(t, front.name+" front, tools", tools, n, largest, err)
		resources, pages, largest, err := listPages(t, func(c string) (*mcp.ListResourcesResult, error) {
			return cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: c})
		}, func(r *mcp.ListResourcesResult) ([]string, string) {
			var names []string
			for _, r := range r.Resources {
				names = append(names, r.URI)
			}
			return names, r.NextCursor
		}, "b+file:///")
		t.Logf("%s front, resources/list: %d resources in %d pages, the largest %d bytes; %v", front.name, len(resources), pages, largest, err)
		checkListed(t, front.name+" front, resources", resources, n, largest, err)
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("%s front: the session after the lists: %v; want it kept", front.name, err)
		}
	}
}

// checkListed checks a list of what, from listPages: n items, each once,
// in pages within maxFrontResult.
func checkListed(t *testing.T, what string, names map[string]int, n, largest int, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %.200v; want every page", what, err)
		return
	}
	if len(names) != n {
		t.Errorf("%s: %d listed; want %d", what, len(names), n)
	}
	for name, k := range names {
		if k != 1 {
			t.Errorf("%s: %s listed %d times; want once", what, name, k)
		}
	}
	if largest > maxFrontResult {
		t.Errorf("%s: a page of %d bytes; want at most %d", what, largest, maxFrontResult)
	}
}

// TestListItemPastClientBound: a tool whose definition alone is past
// maxFrontResult as the client gets it cannot be given in any page; the
// list gives the others, each once, and the client keeps its session.
// It is reported where operators look: provlog__status names it among
// the server's skipped_tools, with why (its size), its name scrubbed of
// the server's secrets, and the log says so once, not on every list (a
// client listing in a loop flooded the log with a warning a list).
func TestListItemPastClientBound(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "huge", Version: "1"}, nil)
	for _, tl := range []struct{ name, desc string }{{"a", "small"}, {"huge-s3cret-tool-name", strings.Repeat("d", maxFrontResult)}, {"z", "small"}} {
		srv.AddTool(&mcp.Tool{Name: tl.name, Description: tl.desc, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	logs := &proctest.Buffer{}
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "b", URL: down.URL}}, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	ctx := context.Background()
	for _, front := range bothFronts(t, p) {
		cs := front.cs()
		for range 3 { // a client listing again and again
			tools, pages, largest, err := listPages(t, func(c string) (*mcp.ListToolsResult, error) {
				return cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: c})
			}, func(r *mcp.ListToolsResult) ([]string, string) {
				var names []string
				for _, tl := range r.Tools {
					names = append(names, tl.Name)
				}
				return names, r.NextCursor
			}, "b__")
			t.Logf("%s front: %v in %d pages, the largest %d bytes; %v", front.name, tools, pages, largest, err)
			if err != nil || len(tools) != 2 || tools["b__a"] != 1 || tools["b__z"] != 1 {
				t.Errorf("%s front: %v, %.200v; want b__a and b__z once each", front.name, tools, err)
			}
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Errorf("%s front: the session after the list: %v; want it kept", front.name, err)
		}
	}
	warned := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "huge") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the log names the huge tool in %d lines after 6 lists; want 1 (once per change of the list):\n%.2000s", warned, logs.String())
	}
	p.downstreams()[0].secrets.remember([]string{"s3cret-tool-name"}) // as if a call had redacted it
	skipped, _ := serverStatus(t, callStatus(t, connectMemory(t, p, nil)), "b")["skipped_tools"].(map[string]any)
	t.Logf("provlog__status skipped_tools: %v", skipped)
	for name, why := range skipped {
		if w, _ := why.(string); len(skipped) != 1 || strings.Contains(name, "s3cret") || !strings.HasPrefix(name, "huge-") ||
			!strings.Contains(w, "its definition is ") || !strings.Contains(w, " bytes, past the ") {
			t.Errorf("provlog__status skipped_tools: %v; want the huge tool alone, its name scrubbed, its size said", skipped)
		}
	}
	if len(skipped) == 0 {
		t.Errorf("provlog__status names no skipped tool; want the huge one, with its size")
	}
}
