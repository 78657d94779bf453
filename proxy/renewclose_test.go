package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRenewalEndsAtClose: a run of renewals of a listen the server keeps
// ending, waiting out its backoff when the proxy closes, returns without
// waiting it out, and holds no listen once the proxy closed. The server
// (a go-sdk server of the 2026-07-28 revision over HTTP, behind
// listenCutter) ends the first listen when the test says, and the
// renewed one (sent at once) as soon as it acknowledged it; the next
// renewal then waits out its backoff, made an hour
// (listens.testingOnlyBackoff) so that only the proxy's closing can end
// the wait within the test. The run slept on past Close, its goroutine
// with it, and then went to hold the listen on the closed session.
func TestRenewalEndsAtClose(t *testing.T) {
	srv := subscribableServer("ending", nil)
	drop, now := make(chan struct{}), make(chan struct{})
	close(now)
	c := &listenCutter{when: func(n int64) <-chan struct{} {
		switch n {
		case 1:
			return drop
		case 2:
			return now
		}
		return nil
	}}
	url := serveStateless(t, srv, func(h http.Handler) http.Handler { c.h = h; return c })
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "fx", URL: url}}, nil)
	l := &p.live["fx"].d.listens
	l.testingOnlyBackoff.Store(int64(time.Hour))
	cs := connectMemory(t, p, nil)
	if err := cs.Subscribe(context.Background(), &mcp.SubscribeParams{URI: "fx+" + watchedURI}); err != nil {
		t.Fatalf("subscribing: %v", err)
	}
	close(drop)
	// The listen renewed at once was held, or ended before the
	// acknowledgement was taken; either way a run waits out the backoff
	// before the next renewal: that run's own, or the next run's, begun
	// by the renewed listen's end once the run before has returned.
	waitFor(t, "a run of renewals waiting out its backoff", func() bool {
		return l.testingOnlyWaits.Load() == 1 && l.testingOnlyLive.Load() == 1
	})
	if n := l.testingOnlyHolds.Load(); n != 1 {
		t.Fatalf("the runs went to hold %d listens before Close, want 1", n)
	}
	if n := c.listens.Load(); n != 2 {
		t.Fatalf("the server was sent %d listens before Close, want 2", n)
	}
	// Counted from before Close, not from its return: Close waits for
	// the sessions to stop, by which time a run woken by the closing that
	// went on to renew (rather than return) had done so.
	p.Close()
	waitFor(t, "the run waiting out its backoff to return after Close", func() bool {
		return l.testingOnlyLive.Load() == 0
	})
	if n := l.testingOnlyHolds.Load(); n != 1 {
		t.Errorf("the run went to hold %d listen(s) once the proxy closed", n-1)
	}
	if n := c.listens.Load(); n != 2 {
		t.Errorf("the server was sent %d listens, want 2", n)
	}
}
