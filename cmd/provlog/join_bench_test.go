package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// BenchmarkJoinedRelay measures what the joined bridge spends relaying a
// call's SSE stream to its client: progress notifications and a 64 KiB
// result, as the sidecar writes them, to a client that reads at once.
func BenchmarkJoinedRelay(b *testing.B) {
	var stream bytes.Buffer
	for i := range 8 {
		fmt.Fprintf(&stream, "event: message\nid: %d\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i, i)
	}
	text, _ := json.Marshal(strings.Repeat("a result line of some text, as a tool gives it\n", 1400))
	fmt.Fprintf(&stream, "event: message\nid: 9\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%s}]}}\n\n", text)
	br := &bridge{out: io.Discard, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m := message{ID: json.RawMessage("7"), Method: "tools/call"}
	b.SetBytes(int64(stream.Len()))
	b.ReportAllocs()
	for b.Loop() {
		br.relaySSE(b.Context(), bytes.NewReader(stream.Bytes()), m)
	}
}
