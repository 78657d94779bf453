package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// TestHTTPBatchCap: on the streamable HTTP front, a session of revision
// 2025-03-26 (which has batches) that POSTs a batch of more than
// MaxBatchMessages messages is refused as the stdio front refuses it:
// -32600, id null, naming the count, none served, nothing recorded; a
// batch within the bound is served. The HTTP front served a batch of
// 90,000 pings (under its 4 MiB body bound) whole, answering 90,000
// results in one body.
func TestHTTPBatchCap(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	front := serveHTTP(t, p)
	cs := connectHTTP(t, front, "2025-03-26", nil)
	header := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-03-26"}
	batch := func(n int, msg string) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, msg, i+10)
		}
		return b.String() + "]"
	}
	before := l.size(t)
	const n = 90_000
	ping := `{"jsonrpc":"2.0","id":%d,"method":"ping"}`
	resp, got := postMCP(t, front, batch(n, ping), header)
	want := fmt.Sprintf("holds %d messages, more than the %d", n, MaxBatchMessages)
	if !strings.Contains(got, `"id":null,"error":{"code":-32600,`) || !strings.Contains(got, want) {
		t.Errorf("a batch of %d pings was answered %s with %d bytes, %d results: %.300s", n, resp.Status, len(got), strings.Count(got, `"result"`), got)
	}
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`
	resp, got = postMCP(t, front, batch(MaxBatchMessages+1, call), header)
	if !strings.Contains(got, fmt.Sprintf("holds %d messages", MaxBatchMessages+1)) {
		t.Errorf("a batch of %d tools/calls was answered %s with %d bytes, %d results: %.300s", MaxBatchMessages+1, resp.Status, len(got), strings.Count(got, `"result"`), got)
	}
	if grown := l.size(t) - before; grown != 0 {
		t.Errorf("refused batches grew the log by %d entries", grown)
	}
	// A batch within the bound is served as before.
	if _, got := postMCP(t, front, batch(2, ping), header); strings.Count(got, `"result"`) != 2 {
		t.Errorf("a batch of 2 pings was answered %.300s", got)
	}
}
