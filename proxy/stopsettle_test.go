package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestStopRecordsCallsUnderway: when the proxy stops with calls under
// way, each is cut off at once and recorded so before Close returns (the
// caller closes the log next), whichever path it took and whatever the
// server; a call that comes after is refused, nothing written. A stdio
// server's session waited for its calls to end by their timeouts (a
// minute) before it closed; an HTTP server's call was recorded after Close
// returned, when the log was closed: it stood as a call with no result,
// as a crash leaves one.
func TestStopRecordsCallsUnderway(t *testing.T) {
	for _, tc := range []struct{ name, call string }{
		{"pipe front's own, stdio server", fastHang},
		{"SDK's, stdio server", sdkHang},
		{"pipe front's own, HTTP server", fastHang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l, noted := hangProxy(t, "f")
			started := func() bool { return noted("started") == 1 }
			if strings.HasSuffix(tc.name, "HTTP server") {
				l = newTestLog(t)
				srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
				began := make(chan struct{}, 1)
				srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					began <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				})
				down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
				t.Cleanup(down.Close)
				p = startProxy(t, l, []ServerConfig{{ID: "f", URL: down.URL}}, nil)
				started = func() bool { return len(began) == 1 }
			}
			pc := newPipeClient(t, p)
			before := l.size(t)
			pc.send(onServer(tc.call, "f"))
			waitFor(t, "the call to start", started)
			p.Close()
			n := l.size(t) // as Close left it: nothing waited for
			var results []string
			for i := before; i < n; i++ {
				e := mustParse(t, l.entry(t, i))
				if e.Kind != log.KindCallResult {
					continue
				}
				r, err := log.ParseCallResult(e)
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, r.Error)
			}
			if len(results) != 1 || results[0] != stoppedText {
				t.Errorf("once Close returned, the log held call results %q, want the call cut off by the stop", results)
			}
			if got := string(pc.read()); !strings.Contains(got, stoppedText) {
				t.Errorf("the client got %.300s", got)
			}
			pc.send(strings.ReplaceAll(onServer(fastHang, "f"), `"id":7`, `"id":8`))
			if got := string(pc.read()); !strings.Contains(got, `"id":8`) || !strings.Contains(got, "provlog is stopping") {
				t.Errorf("a call once stopped: %.300s", got)
			}
			if got := l.size(t); got != n {
				t.Errorf("a call once stopped grew the log by %d entries", got-n)
			}
		})
	}
}
