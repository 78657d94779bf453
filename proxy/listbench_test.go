package proxy

import (
	"context"
	"testing"
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
