package proxy

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// linesWith returns the lines of log that hold substr.
func linesWith(log *proctest.Buffer, substr string) []string {
	var out []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestCallLogLines: the proxy's log lines about a call name its actor
// (and server, tool and entries), over either front and when the call is
// refused; the bearer token never reaches the log.
func TestCallLogLines(t *testing.T) {
	var buf proctest.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, func(o *Options) { o.Logger = logger })
	ctx := context.Background()
	for _, cs := range []*mcp.ClientSession{connectMemory(t, p, nil), connectHTTP(t, serveHTTP(t, p), "2025-11-25", nil)} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"}); err != nil {
			t.Fatal(err)
		}
	}
	got := linesWith(&buf, "proxy: call recorded")
	if len(got) != 2 {
		t.Fatalf("%d call lines, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, actor := range []string{"test-actor", testActor} {
		for _, want := range []string{"actor=" + actor, "server=fx", "tool=ok", "call=", "result=", "is_error=false"} {
			if !strings.Contains(got[i], want) {
				t.Errorf("call line %q lacks %s", got[i], want)
			}
		}
	}

	// A call the log cannot record: the refusal names its actor.
	p2 := startProxy(t, newTestLog(t), []ServerConfig{fixtureServerConfig(t, "fx")}, func(o *Options) {
		o.Logger, o.Log = logger, failingRecorder{}
	})
	connectHTTP(t, serveHTTP(t, p2), "2025-11-25", nil).CallTool(ctx, &mcp.CallToolParams{Name: "fx__ok"})
	refused := linesWith(&buf, "recording a call failed")
	if len(refused) != 1 || !strings.Contains(refused[0], "actor="+testActor) {
		t.Errorf("refusal lines %q: want one naming actor %s", refused, testActor)
	}
	if n := len(linesWith(&buf, testToken)); n > 0 {
		t.Errorf("the bearer token is in %d log lines", n)
	}
}
