package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestCatalogueFollowsLists runs a server that changes its four lists
// while the proxy serves it (one generic sync keeps them all): what comes
// is registered under its front name, what goes is removed and its name
// freed in the router, what changes is registered anew, and the front
// serves each through to the server's own name.
func TestCatalogueFollowsLists(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	type lists struct {
		tools, prompts, resources, templates []string
		descA                                string
	}
	read := func() lists {
		var got lists
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.tools = append(got.tools, tl.Name)
		}
		for pr, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.prompts = append(got.prompts, pr.Name)
		}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.resources = append(got.resources, r.URI)
			if r.URI == "fx+fixture:///a" {
				got.descA = r.Description
			}
		}
		for rt, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got.templates = append(got.templates, rt.URITemplate)
		}
		for _, s := range [][]string{got.tools, got.prompts, got.resources, got.templates} {
			slices.Sort(s)
		}
		return got
	}

	before := read()
	if !slices.Contains(before.tools, "fx__reshape") || slices.Contains(before.tools, "fx__added") ||
		!slices.Equal(before.prompts, []string{"fx__p1"}) ||
		!slices.Equal(before.resources, []string{"fx+fixture:///a", "fx+fixture:///b"}) || before.descA != "first" ||
		!slices.Equal(before.templates, []string{"fx+fixture:///t/{id}"}) {
		t.Fatalf("front lists before: %+v", before)
	}
	if d, name := p.router.prompt("fx__p1"); d == nil || name != "p1" {
		t.Fatalf("router: fx__p1 -> %v %q", d, name)
	}

	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__reshape", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("reshape: %v %s", err, mustJSON(res))
	}
	var after lists
	eventuallyTrue(t, "the front lists follow the server's", func() bool {
		after = read()
		return slices.Contains(after.tools, "fx__added") && slices.Equal(after.prompts, []string{"fx__p2"}) &&
			after.descA == "second" && len(after.templates) == 0
	})
	if !slices.Equal(after.resources, before.resources) {
		t.Errorf("resources after: %v, want %v", after.resources, before.resources)
	}

	// The router frees what went and routes what came.
	if d, _ := p.router.prompt("fx__p1"); d != nil {
		t.Error("router still has the removed prompt fx__p1")
	}
	if d := p.router.owner(resourceNames, "fx+fixture:///t/{id}"); d != nil {
		t.Error("router still has the removed template")
	}
	if d, name := p.router.tool("fx__added"); d == nil || name != "added" {
		t.Errorf("router: fx__added -> %v %q", d, name)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__p2"})
	if err != nil || !strings.Contains(mustJSON(gp), "prompt p2") {
		t.Errorf("prompt fx__p2: %v %s", err, mustJSON(gp))
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fx+fixture:///a"})
	if err != nil || !strings.Contains(mustJSON(rr), "contents of fixture:///a") {
		t.Errorf("resource fx+fixture:///a: %v %s", err, mustJSON(rr))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__added", Arguments: map[string]any{}})
	if err != nil || textOf(res) != "added" {
		t.Errorf("fx__added: %v %s", err, mustJSON(res))
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__p1"}); err == nil {
		t.Error("the removed prompt fx__p1 still answers")
	}
}

// TestListCursorLoop: a server whose tools/list pages go round in a loop
// (a nextCursor it gave before) is read no further once the cursor comes
// back, and the warning says so, naming the cursor; it was read a
// thousand times and the warning said only "more than 1000 pages".
func TestListCursorLoop(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "loop", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	var lists atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			lists.Add(1)
			cursor := "a"
			if r := req.(*mcp.ListToolsRequest); r.Params != nil && r.Params.Cursor == "a" {
				cursor = "b"
			} else if r.Params != nil && r.Params.Cursor == "b" {
				cursor = "a"
			}
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "t" + cursor, InputSchema: obj}}, NextCursor: cursor}, nil
		}
	})
	srv.AddTool(&mcp.Tool{Name: "unlisted", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	startProxy(t, newTestLog(t), []ServerConfig{{ID: "l", URL: down.URL}}, func(o *Options) { o.Logger = logger })
	if n := lists.Load(); n != 3 {
		t.Errorf("the proxy read %d pages, want 3 (the third gives the first's cursor again)", n)
	}
	if got := linesWith(&buf, "listing tools failed"); len(got) != 1 || !strings.Contains(got[0], `\"a\"`) || !strings.Contains(got[0], "loop") {
		t.Errorf("warning lines %q: want one naming the cursor and the loop", got)
	}
}

// TestListTooLong: a server whose tools list grows past maxListItems
// (pages of 200 tools, always a next page) has its list read no further
// than the page that passes the bound: the front offers the last list
// read, and the warning names the bound. The proxy read on to the
// thousandth page, 200,000 tools.
func TestListTooLong(t *testing.T) {
	const perPage = 200
	pages := growingList(t, perPage, 0, "", fmt.Sprint(maxListItems))
	if n, want := pages, int32(maxListItems/perPage+1); n != want {
		t.Errorf("the proxy read %d pages, want %d (the first past %d tools)", n, want, maxListItems)
	}
}

// TestListTooBig: a server whose tools list grows past maxListBytes
// (pages of one tool described in 4 MiB, each page within what a message
// may hold) has its list read no further than the page that passes the
// bound, as for maxListItems. The proxy read every page: a list may have
// 1,000 pages of 16 MiB, 16 GB held at once.
func TestListTooBig(t *testing.T) {
	const desc = 4 << 20
	pages := growingList(t, 1, maxListBytes/desc+3, strings.Repeat("d", desc), fmt.Sprint(maxListBytes>>20, " MiB"))
	// Each page is its description and some JSON around it.
	if n, want := pages, int32(maxListBytes/desc); n != want {
		t.Errorf("the proxy read %d pages, want %d (the first past %d MiB)", n, want, maxListBytes>>20)
	}
}

// growingList serves a server whose tools list, once its tool grow is
// called, has pages of perPage tools described as desc, pages of them
// (0: always a next page). It checks that the proxy's read of it fails
// once, with a warning naming bound, and that the front offers the last
// list read, and returns the pages the proxy read.
func growingList(t *testing.T, perPage, pages int, desc, bound string) int32 {
	srv := mcp.NewServer(&mcp.Implementation{Name: "long", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	var long atomic.Bool
	var read atomic.Int32
	srv.AddTool(&mcp.Tool{Name: "grow", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		long.Store(true)
		return &mcp.CallToolResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" || !long.Load() {
				return next(ctx, method, req)
			}
			read.Add(1)
			page := 0
			if r := req.(*mcp.ListToolsRequest); r.Params != nil && r.Params.Cursor != "" {
				page, _ = strconv.Atoi(r.Params.Cursor)
			}
			res := &mcp.ListToolsResult{}
			if pages == 0 || page+1 < pages {
				res.NextCursor = strconv.Itoa(page + 1)
			}
			for i := range perPage {
				res.Tools = append(res.Tools, &mcp.Tool{Name: fmt.Sprintf("t%d_%d", page, i), Description: desc, InputSchema: obj})
			}
			return res, nil
		}
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "l", URL: down.URL}}, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "l__grow"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(freshFor) // the read on connecting serves no longer
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the read failed", func() bool { return len(linesWith(&buf, "listing tools failed")) > 0 })
	if got := linesWith(&buf, "listing tools failed"); len(got) != 1 || !strings.Contains(got[0], bound) {
		t.Errorf("warning lines %q: want one naming the bound, %s", got, bound)
	}
	var names []string
	for _, tl := range res.Tools {
		if strings.HasPrefix(tl.Name, "l__") {
			names = append(names, tl.Name)
		}
	}
	if !slices.Equal(names, []string{"l__grow"}) {
		t.Errorf("the front lists %q of the server's tools, want its last list read, l__grow", names)
	}
	return read.Load()
}

// TestListNameTwice: a server whose tools/list pages list one name twice,
// with two definitions, is warned of, naming the tool; the front offers
// the last definition and the tools entry holds that one. Nothing said
// that the first was dropped.
func TestListNameTwice(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "twice", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	last := &mcp.Tool{Name: "a", Description: "the second", InputSchema: obj}
	srv.AddTool(last, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			if r := req.(*mcp.ListToolsRequest); r.Params != nil && r.Params.Cursor == "2" {
				return &mcp.ListToolsResult{Tools: []*mcp.Tool{last}}, nil
			}
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "a", Description: "the first", InputSchema: obj}}, NextCursor: "2"}, nil
		}
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	var buf proctest.Buffer
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "w", URL: down.URL}}, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	if got := linesWith(&buf, "more than once"); len(got) != 1 || !strings.Contains(got[0], "tool=a") {
		t.Errorf("warning lines %q: want one naming tool a", got)
	}
	res, err := connectMemory(t, p, nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "w__a" && tl.Description != "the second" {
			t.Errorf("the front offers w__a as %q", tl.Description)
		}
	}
	raw, _ := json.Marshal(last)
	te, err := log.ParseTools(l.entriesOf(t, log.KindTools)[0])
	if err != nil || len(te.Tools) != 1 || te.Tools[0].SHA256 != definitionSum(raw) {
		t.Errorf("tools entry %+v (%v): want a's last definition, %s", te, err, definitionSum(raw))
	}
}
