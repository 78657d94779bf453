package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestChangeServerUnderCalls: a server whose config changes (a stdio
// server's env, an HTTP server's url; real processes and servers) is
// replaced while four clients (two stdio sessions, an HTTP session and a
// sessionless 2026-07-28 client) call its tool without pause: no call is
// refused, a call under way on the old instance finishes there while the
// new one already takes calls, every side effect has its call entry, and
// each call entry names the definition of the instance that served it,
// from a tools entry before it. When the definitions are the same the
// clients hear of no change; when they differ, they are told and the
// change is reported.
func TestChangeServerUnderCalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		http    bool
		newDesc string // the new instance's description of append
	}{
		{"stdio", false, ""},
		{"stdio, tool changed", false, "appends, differently"},
		{"http", true, ""},
		{"http, tool changed", true, "appends, differently"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			oldFile, newFile := filepath.Join(dir, "old"), filepath.Join(dir, "new")
			config := func(file, desc string) ServerConfig {
				if tc.http {
					return ServerConfig{ID: "a", URL: appendHTTP(t, file, desc)}
				}
				cfg := fixtureServerConfig(t, "a")
				cfg.Env[fixtureAppendEnv], cfg.Env[fixtureDescEnv] = file, desc
				return cfg
			}
			// Both before the proxy, which is closed first.
			oldCfg, newCfg := config(oldFile, ""), config(newFile, tc.newDesc)
			l := newTestLog(t)
			p := startProxy(t, l, []ServerConfig{oldCfg}, nil)
			waitRouted(t, p, "a__append", "a__wait_file")
			url := serveHTTP(t, p)
			cl := newClientLog()
			clients := []*mcp.ClientSession{connectMemory(t, p, cl), connectMemory(t, p, nil),
				connectHTTP(t, url, "2025-11-25", nil), connectHTTP(t, url, "", nil)}
			ctx := context.Background()

			flag := filepath.Join(dir, "go-on")
			before := l.size(t)
			slow := make(chan error, 1)
			go func() {
				res, err := clients[0].CallTool(ctx, &mcp.CallToolParams{Name: "a__wait_file", Arguments: map[string]any{"path": flag}})
				if err == nil && (res.IsError || textOf(res) != "found "+flag) {
					err = fmt.Errorf("%s", textOf(res))
				}
				slow <- err
			}()
			l.waitSize(t, before+1) // its call entry: it is under way on the old instance

			stop := make(chan struct{})
			errs := make(chan error, len(clients))
			var wg sync.WaitGroup
			for i, cs := range clients {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						text := fmt.Sprintf("c%d-%d", i, n)
						res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__append", Arguments: map[string]any{"text": text}})
						if err == nil && res.IsError {
							err = fmt.Errorf("%s", textOf(res))
						}
						if err != nil {
							errs <- fmt.Errorf("call %s: %v", text, err)
							return
						}
					}
				})
			}
			waitFor(t, "every client's calls reach the old instance", func() bool { return fromEvery(lines(oldFile), len(clients)) })
			drainNotifications(cl.toolChanges)
			oldD := p.downstreams()[0]
			changed := make(chan error, 1)
			go func() { changed <- p.ChangeServers(nil, []ServerConfig{newCfg}) }()
			waitFor(t, "every client's calls reach the new instance, or one is refused", func() bool {
				return fromEvery(lines(newFile), len(clients)) || len(errs) > 0
			})
			select {
			case err := <-changed:
				t.Errorf("ChangeServers returned (%v) while the old instance's call was under way", err)
				changed <- err
			default:
			}
			if err := os.WriteFile(flag, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := <-slow; err != nil {
				t.Errorf("the call under way on the old instance: %v", err)
			}
			if err := <-changed; err != nil {
				t.Fatal(err)
			}
			// A call the router sent to the old instance just before it
			// was replaced goes on to the new one.
			in := &callIn{d: oldD, tool: "append", params: &mcp.CallToolParamsRaw{Name: "a__append", Arguments: json.RawMessage(`{"text":"redirected"}`)}, start: time.Now()}
			if _, rerr := p.serveCall(ctx, in); rerr != nil || in.d == oldD {
				t.Errorf("a call on the old instance once it was replaced: %v, want it served by the new one", rerr)
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if !slices.Contains(lines(newFile), "redirected") {
				t.Error("the call redirected to the new instance did not reach it")
			}
			checkServedDefinitions(t, l, lines(oldFile), lines(newFile))
			t.Logf("%d calls served by the old instance, %d by the new one", len(lines(oldFile)), len(lines(newFile)))

			changes := p.Downstreams()[0].ToolChanges
			if tc.newDesc == "" {
				if len(changes) != 0 {
					t.Errorf("tool changes %+v, want none", changes)
				}
				if n := len(cl.toolChanges); n != 0 {
					t.Errorf("the client was told %d times that the tools changed, want never", n)
				}
			} else {
				if len(changes) != 1 || changes[0].Tool != "append" {
					t.Errorf("tool changes %+v, want append's", changes)
				}
				waitFor(t, "the client is told the tools changed", func() bool { return len(cl.toolChanges) > 0 })
			}
		})
	}
}

// checkServedDefinitions checks that every text in oldLines and
// newLines (side effects of the old and the new instance of server a)
// has one call entry of a's append, which names the definition of
// append in the first tools entry (oldLines) or the last (newLines),
// and comes after the tools entry that holds it.
func checkServedDefinitions(t *testing.T, l *testLog, oldLines, newLines []string) {
	t.Helper()
	calls := map[string]*log.CallEntry{}
	at := map[string]uint64{}
	var tools []uint64
	sums := map[uint64]string{} // tools entry -> append's definition
	for i := uint64(0); i < l.size(t); i++ {
		e := mustParse(t, l.entry(t, i))
		switch e.Kind {
		case log.KindTools:
			te, err := log.ParseTools(e)
			if err != nil {
				t.Fatal(err)
			}
			for _, ts := range te.Tools {
				if te.Server == "a" && ts.Name == "append" {
					tools, sums[i] = append(tools, i), ts.SHA256
				}
			}
		case log.KindCall:
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			var a struct{ Text string }
			json.Unmarshal(c.Args, &a)
			if c.Tool == "append" {
				if calls[a.Text] != nil {
					t.Errorf("two call entries of %s", a.Text)
				}
				calls[a.Text], at[a.Text] = c, i
			}
		}
	}
	if len(tools) < 2 {
		t.Fatalf("tools entries of a %v, want the old instance's and the new one's", tools)
	}
	for _, side := range []struct {
		lines []string
		tools uint64
	}{{oldLines, tools[0]}, {newLines, tools[len(tools)-1]}} {
		for _, text := range side.lines {
			c := calls[text]
			switch {
			case c == nil:
				t.Errorf("side effect %s has no call entry", text)
			case c.ToolSHA256 != sums[side.tools]:
				t.Errorf("call %s names definition %.12s, want %.12s, of the instance that served it (tools entry %d)", text, c.ToolSHA256, sums[side.tools], side.tools)
			case at[text] < side.tools:
				t.Errorf("call %s (entry %d) comes before the tools entry %d of the definition it names", text, at[text], side.tools)
			}
		}
	}
}

// lines returns the lines of file (none if it does not exist).
func lines(file string) []string {
	b, _ := os.ReadFile(file)
	return strings.Fields(string(b))
}

// fromEvery reports whether texts has one of each of n clients ("c<i>-").
func fromEvery(texts []string, n int) bool {
	for i := range n {
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf("c%d-", i)) }) {
			return false
		}
	}
	return true
}

// drainNotifications empties ch.
func drainNotifications(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// appendHTTP serves an MCP server over streamable HTTP with the tools
// append (to file, described as desc) and wait_file, and returns its URL.
func appendHTTP(t *testing.T, file, desc string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "append", Version: "1"}, nil)
	addAppend(s, file, desc)
	addWaitFile(s)
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(down.Close)
	return down.URL
}

// TestChangeServerFailsToStart: a call that comes while a changed
// server's new instance is starting waits for it; when it has not started
// within the bound (its command does not exist), the call is refused,
// saying so, and nothing is written; the server's tools leave the front,
// and calls that come then are told it is not connected.
func TestChangeServerFailsToStart(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a")}, nil)
	p.testingOnlyStartBound = 3 * time.Second
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	waitRouted(t, p, "a__ok")
	bad := ServerConfig{ID: "a", Command: []string{filepath.Join(t.TempDir(), "no-such-server")}}
	if err := p.ChangeServers(nil, []ServerConfig{bad}); err != nil {
		t.Fatal(err)
	}
	before := l.size(t)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ok", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `server "a" was changed in the configuration (live reload), and its new instance did not start within 3s`) ||
		!strings.Contains(err.Error(), "no-such-server") {
		t.Errorf("a call while the new instance fails to start: %v, want it refused, saying why", err)
	}
	waitFor(t, "a's tools leave the front", func() bool {
		lt, err := cs.ListTools(ctx, nil)
		return err == nil && !slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == "a__ok" })
	})
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ok", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `server "a" is not connected`) {
		t.Errorf("a call once the bound passed: %v, want it refused as not connected", err)
	}
	if got := l.size(t); got != before {
		t.Errorf("the refused calls wrote %d entries", got-before)
	}
}

// TestChangeServerOffersLess: a changed server's new instance that offers
// no tools (an HTTP server with a prompt only) does not keep the old
// instance's tools at the front: they leave it once it has started, and
// a call of one is an unknown tool, with nothing written.
func TestChangeServerOffersLess(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "prompts", Version: "1"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a")}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	waitRouted(t, p, "a__ok")
	if err := p.ChangeServers(nil, []ServerConfig{{ID: "a", URL: down.URL}}); err != nil {
		t.Fatal(err)
	}
	before := l.size(t)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ok", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "a__ok"`) {
		t.Errorf("a call of a tool the new instance does not offer: %v, want an unknown tool", err)
	}
	if got := l.size(t); got != before {
		t.Errorf("the call wrote %d entries", got-before)
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if strings.HasPrefix(tl.Name, "a__") {
			t.Errorf("the old instance's tool %s is still offered", tl.Name)
		}
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a__hello"})
	if err != nil || len(res.Messages) != 1 {
		t.Errorf("the new instance's prompt: %v %v", res, err)
	}
}

// TestChangeServerReads: a changed server's resources and prompts stay
// at the front across the change, and a read of one once the old
// instance has stopped is served by the new one and recorded: the
// front's handlers of what did not change are the old instance's, and
// send the read on to its successor.
func TestChangeServerReads(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "a")
	cfg.Env[fixtureEnv] = "lists"
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	waitRouted(t, p, "a__reshape")
	changed := fixtureServerConfig(t, "a")
	changed.Env[fixtureEnv], changed.Env["CHANGED"] = "lists", "1"
	if err := p.ChangeServers(nil, []ServerConfig{changed}); err != nil {
		t.Fatal(err)
	}
	before := l.size(t)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "a+fixture:///a"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "contents of fixture:///a" {
		t.Errorf("reading a resource after the change: %v %v", rr, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a__p1"})
	if err != nil || len(gp.Messages) != 1 {
		t.Errorf("getting a prompt after the change: %v %v", gp, err)
	}
	var reads []string
	for i := before; i < l.size(t); i++ {
		if e := mustParse(t, l.entry(t, i)); e.Kind != log.KindTools { // the new instance's list
			reads = append(reads, e.Kind)
		}
	}
	if want := []string{log.KindResourceRead, log.KindPromptGet}; !slices.Equal(reads, want) {
		t.Errorf("the reads wrote %q, want %q", reads, want)
	}
}
