package proxy

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNewerCallCancelledDownstream: a 2026-07-28 client's call that the
// SDK's stateless handler serves (the client asks for log messages,
// which only its event stream carries) and that the client gives up on
// (it goes away: its request ends) is cancelled at the server too, as a
// 2025-11-25 client's call is by its notifications/cancelled. The
// handler's context outlived the request, so the proxy waited on for the
// server's answer and the server ran on until the call's timeout. A call
// whose timeout (the server's config) passes is cancelled there too.
func TestNewerCallCancelledDownstream(t *testing.T) {
	l := newTestLog(t)
	gone, slow := fixtureServerConfig(t, "gone"), fixtureServerConfig(t, "slow")
	gone.Env[fixtureCancelledEnv] = t.TempDir() + "/cancelled"
	slow.Env[fixtureCancelledEnv] = t.TempDir() + "/cancelled"
	slow.Timeout = time.Second
	p := startProxy(t, l, []ServerConfig{gone, slow}, nil)
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the client speaks %s", v)
	}
	for _, cfg := range []ServerConfig{gone, slow} {
		before, at := p.statelessCalls.Load(), l.size(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: cfg.ID + "__hang", Arguments: map[string]any{},
				Meta: mcp.Meta{mcp.MetaKeyLogLevel: "debug"}})
			if err == nil && !res.IsError {
				err = errors.New("answered")
			}
			done <- err
		}()
		if cfg.ID == "gone" {
			// Given up only once the server is at work on the call: a
			// call given up sooner is rightly never sent (or never run),
			// and the server has nothing to be told. Its call entry in
			// the log was not that point: the proxy writes it before it
			// starts the server's 2026-07-28 session (a second process,
			// for the first such call) and sends the call, and under load
			// the client went away in between.
			waitNoted(t, cfg.Env[fixtureCancelledEnv], "started")
			cancel()
		}
		if err := <-done; err == nil {
			t.Fatalf("%s: the client's call returned no error", cfg.ID)
		}
		cancel()
		if n := p.statelessCalls.Load() - before; n != 0 {
			t.Fatalf("%s: the HTTP front served the call itself, not the SDK's handler", cfg.ID)
		}
		waitNoted(t, cfg.Env[fixtureCancelledEnv], "cancelled")
		want := map[string]string{"gone": "cancelled by the client", "slow": "did not answer hang within 1s"}[cfg.ID]
		if _, raw := l.callAt(t, at); !strings.Contains(string(raw), want) {
			t.Errorf("%s: the call's entries say %s, want %q", cfg.ID, raw, want)
		}
	}
}

// waitNoted waits until the fixture's "hang" noted what ("started" or
// "cancelled") in path.
func waitNoted(t *testing.T, path, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // for a hung server, not a bound
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), what) {
			return
		}
		if time.Now().After(deadline) {
			if what == "started" {
				t.Fatalf("the server never took up its call (%s)", path)
			}
			t.Fatalf("the server was not told that its call was cancelled (%s)", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
