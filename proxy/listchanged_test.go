package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// flipServer is a go-sdk server whose tool "flip" adds its tool "extra"
// or removes it, and which counts the list requests it gets by method.
type flipServer struct {
	srv *mcp.Server
	mu  sync.Mutex
	on  bool
	n   map[string]int
}

func newFlipServer() *flipServer {
	f := &flipServer{srv: mcp.NewServer(&mcp.Implementation{Name: "flip", Version: "1"}, nil), n: map[string]int{}}
	obj := map[string]any{"type": "object"}
	extra := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra"}}}, nil
	}
	f.srv.AddTool(&mcp.Tool{Name: "flip", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.on = !f.on; f.on {
			f.srv.AddTool(&mcp.Tool{Name: "extra", InputSchema: obj}, extra)
		} else {
			f.srv.RemoveTools("extra")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flipped"}}}, nil
	})
	f.srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	f.srv.AddResource(&mcp.Resource{Name: "r", URI: "test://r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	f.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			f.mu.Lock()
			f.n[method]++
			f.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	return f
}

func (f *flipServer) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[method]
}

// TestListChangedOrder: a server's tools/list_changed reaches the front's
// client after the front's list has changed (a tools/list on the
// notification shows the change), and the proxy re-reads only the list
// the server said changed.
func TestListChangedOrder(t *testing.T) {
	f := newFlipServer()
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "f", URL: down.URL}}, nil)
	cl := newClientLog()
	cs := fastSession(t, p, connectHTTP(t, serveHTTP(t, p), "2025-11-25", cl))
	ctx := context.Background()
	others := func() int {
		return f.count("prompts/list") + f.count("resources/list") + f.count("resources/templates/list")
	}
	for i := range 4 {
		tools, others0 := f.count("tools/list"), others()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__flip"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-cl.toolChanges:
		case <-time.After(30 * time.Second):
			t.Fatalf("flip %d: no tools/list_changed at the front", i)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		has := slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "f__extra" })
		if want := i%2 == 0; has != want {
			t.Errorf("flip %d: on the notification the front lists f__extra: %v, want %v", i, has, want)
		}
		if has {
			// Called at once: the call names the new definition, which a
			// tools entry before the call's holds.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__extra"})
			if err != nil || res.IsError {
				t.Fatalf("f__extra: %v", err)
			}
			e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
			sum, _ := e.Fields["tool_sha256"].(string)
			at, err := strconv.ParseUint(fmt.Sprint(e.Fields["call"]), 10, 64)
			if err != nil || !definedBefore(t, l, at, "extra", sum) {
				t.Errorf("flip %d: call %v names definition %q, which no earlier tools entry holds", i, e.Fields["call"], sum)
			}
		}
		if got := f.count("tools/list") - tools; got != 1 {
			t.Errorf("flip %d: the proxy read the tools %d times, want once", i, got)
		}
		if got := others() - others0; got != 0 {
			t.Errorf("flip %d: the proxy read %d other lists on a tools/list_changed", i, got)
		}
	}
}

// definedBefore reports whether a tools entry before index at gives tool
// the definition sum.
func definedBefore(t *testing.T, l *testLog, at uint64, tool, sum string) bool {
	for i := range at {
		e := mustParse(t, l.entry(t, i))
		if e.Kind != log.KindTools {
			continue
		}
		te, err := log.ParseTools(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range te.Tools {
			if ts.Name == tool && ts.SHA256 == sum && sum != "" {
				return true
			}
		}
	}
	return false
}

// BenchmarkListChanged measures how long a server's list change takes to
// reach a client, directly and through the proxy, side by side: an
// operation calls the tool that changes the server's tool list and waits
// for the client's tools/list_changed. Over HTTP the server is a go-sdk
// server in this process; over stdio go-sdk's everything-server
// (PROVLOG_EVERYTHING_SERVER, its test_trigger_tool_change).
//
//	go test ./proxy -run '^$' -bench ListChanged
func BenchmarkListChanged(b *testing.B) {
	run := func(b *testing.B, connect func(*mcp.ClientOptions) *mcp.ClientSession, tool string) {
		changes := make(chan struct{}, 16)
		cs := connect(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changes <- struct{}{} }})
		ctx := context.Background()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool}); err != nil {
				b.Fatal(err)
			}
			select {
			case <-changes:
			case <-time.After(30 * time.Second):
				b.Fatal("no tools/list_changed")
			}
		}
	}
	client := func(b *testing.B, t mcp.Transport, opts *mcp.ClientOptions) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, opts)
		cs, err := c.Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	viaProxy := func(b *testing.B, cfg ServerConfig) func(*mcp.ClientOptions) *mcp.ClientSession {
		return func(opts *mcp.ClientOptions) *mcp.ClientSession {
			p := startProxy(b, newTestLog(b), []ServerConfig{cfg}, nil)
			return fastSession(b, p, client(b, &mcp.StreamableClientTransport{Endpoint: serveHTTP(b, p),
				HTTPClient: &http.Client{Transport: &bearer{testToken, http.DefaultTransport}}}, opts))
		}
	}
	b.Run("http", func(b *testing.B) {
		f := newFlipServer()
		down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil))
		b.Cleanup(down.Close)
		b.Run("direct", func(b *testing.B) {
			run(b, func(opts *mcp.ClientOptions) *mcp.ClientSession {
				return client(b, &mcp.StreamableClientTransport{Endpoint: down.URL}, opts)
			}, "flip")
		})
		b.Run("proxied", func(b *testing.B) { run(b, viaProxy(b, ServerConfig{ID: "f", URL: down.URL}), "f__flip") })
	})
	b.Run("stdio", func(b *testing.B) {
		bin := os.Getenv("PROVLOG_EVERYTHING_SERVER")
		if bin == "" {
			b.Skip("PROVLOG_EVERYTHING_SERVER is not set")
		}
		b.Run("direct", func(b *testing.B) {
			run(b, func(opts *mcp.ClientOptions) *mcp.ClientSession {
				return client(b, &mcp.CommandTransport{Command: exec.Command(bin)}, opts)
			}, "test_trigger_tool_change")
		})
		b.Run("proxied", func(b *testing.B) {
			run(b, viaProxy(b, ServerConfig{ID: "go", Command: []string{bin}}), "go__test_trigger_tool_change")
		})
	})
}
