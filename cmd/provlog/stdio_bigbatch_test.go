package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestServeStdioHugeBatch runs the real binary as a stdio MCP server on a
// session of revision 2025-03-26, which has JSON-RPC batches, and sends
// it one batch of 100,000 pings (4 MB, under the 16 MiB line limit):
// the batch is answered -32600 with id null, saying it holds more
// messages than a batch may, none of them is served, and the session goes
// on. The sidecar used to serve it, 100,000 requests at once: its RSS
// rose from 35 MB to 178 MB (485 MB for a 16 MB batch of 350,000 pings)
// and it spent 5 s of CPU on the one line.
func TestServeStdioHugeBatch(t *testing.T) {
	s := startStdioProc(t, "")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const n = 100_000
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+10)
	}
	b.WriteByte(']')
	s.send(b.String())
	if a := s.next(); !strings.HasPrefix(a, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) || !strings.Contains(a, "batch") {
		t.Errorf("a batch of %d pings was answered with %d bytes: %.300s", n, len(a), a)
	}
	// A batch within the limit is served as before.
	s.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
	if a := s.next(); !strings.HasPrefix(a, `[`) || !strings.Contains(a, `"id":2`) || !strings.Contains(a, `"id":3`) {
		t.Errorf("a batch of 2 pings was answered %.300s", a)
	}
	s.send(createTask("4", "after"))
	answered(t, s.next(), "4")
	s.end()
}
