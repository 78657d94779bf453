package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkList: one tools/list through the proxy's HTTP front, its
// server the fixture (a stdio process, 10 tools). In "served" the lists
// come faster than freshFor, so nearly all are answered from the last
// read (what a burst of lists costs); in "read" each list reads the
// server's list first (listExpired), what a list costs once a second.
//
//	go test ./proxy -run '^$' -bench 'List$'
func BenchmarkList(b *testing.B) {
	p := startProxy(b, newTestLog(b), []ServerConfig{{ID: "fx", Command: fixtureServer(b), Env: map[string]string{fixtureEnv: "1"}}}, nil)
	cs := benchSession(b, serveHTTP(b, p))
	list := func(b *testing.B, before func()) {
		b.ReportAllocs()
		for b.Loop() {
			before()
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("served", func(b *testing.B) { list(b, func() {}) })
	b.Run("read", func(b *testing.B) { list(b, func() { listExpired(p) }) })
}

// listExpired makes the last reads of p's servers' lists serve no
// longer, so that the next list reads them.
func listExpired(p *Proxy) {
	for _, d := range p.downstreams() {
		d.cat.mu.Lock()
		clear(d.cat.begunAt[:])
		d.cat.mu.Unlock()
	}
}

// BenchmarkListsHeld: the heap a proxy keeps for one server's list of
// 10,000 tools (each about 600 bytes as listed), read from a go-sdk
// server in this process over HTTP: in use after a GC once the proxy has
// read the list on connecting (held-B), and once a front client's list
// has read it again (reheld-B), less what was in use before the proxy
// started. It includes what the SDK's front keeps of the tools it
// registered; a copy of the list more or less shows as some 6 MB.
//
//	go test ./proxy -run '^$' -bench 'ListsHeld$' -benchtime 1x
func BenchmarkListsHeld(b *testing.B) {
	const n = 10_000
	srv := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1"}, nil)
	obj := map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}
	for i := range n {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%05d", i), Description: strings.Repeat("x", 500), InputSchema: obj},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	b.Cleanup(down.Close)
	var held, reheld uint64
	for b.Loop() {
		before := heapInUse()
		p := startProxy(b, newTestLog(b), []ServerConfig{{ID: "m", URL: down.URL}}, nil)
		held += heapInUse() - before
		cs := benchSession(b, serveHTTP(b, p))
		listExpired(p)
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		reheld += heapInUse() - before
		runtime.KeepAlive(p)
	}
	b.ReportMetric(float64(held)/float64(b.N), "held-B")
	b.ReportMetric(float64(reheld)/float64(b.N), "reheld-B")
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
