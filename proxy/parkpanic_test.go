package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestParkedPanicScrubbed: a parked call (a 2026-07-28 client's call of a
// tool of the fixture, a real process pinned to 2025-11-25) whose
// downstream work panics with a text quoting the call's redacted argument
// is the call's error, and the proxy's log line saying it panicked is
// scrubbed of that value: a panic's text may be made of what the client
// or the server sent. No real server makes the work panic, so the test
// has it panic (parking.testingOnlyPanic). The line was logged with the
// panic's text as it was; and the client's error said "provlog: "
// twice.
func TestParkedPanicScrubbed(t *testing.T) {
	const secret = "sk-Parked/31+Zo"
	cfg := fixtureServerConfig(t, "fx")
	cfg.Protocol, cfg.Redact = "2025-11-25", []string{"token"}
	var buf proctest.Buffer
	p := startProxy(t, newTestLog(t), []ServerConfig{cfg}, func(o *Options) { o.Logger = debugLogger(&buf) })
	text := "the server sent back " + secret
	p.parked.testingOnlyPanic.Store(&text)
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the client speaks %s", v)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__ok", Arguments: map[string]any{"token": secret}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Message != "provlog: internal error while making the call" {
		t.Fatalf("fx__ok: %v, want the parked call's internal error, once prefixed", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(string(we.Data), secret) {
		t.Errorf("the client's error holds the redacted value: %v %s", err, we.Data)
	}
	// The line is written before the call's error is (the recovery logs,
	// then fails the call), so it is there once the client has its answer.
	checkLogScrubbed(t, &buf, secret, "panic in a parked call")
}
