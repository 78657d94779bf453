//go:build unix

package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIssuerNamespaceLaggingSidecar: sidecar B of a shared log, with a
// static token as idp:bob, stops reading the log for a while (here
// SIGSTOP: a stalled VM, a GC pause, a throttled container; the same
// holds while its reads of the log fail). Meanwhile A starts with issuer
// idp:, writes its namespace entry and, after its 2s wait for the other
// sidecars to read it, serves OAuth idp:bob. B then takes its static
// token as idp:bob on a view of the log's namespaces older than that
// wait: two actors act as idp:bob, and A's check after the wait found
// nothing to warn of.
func TestIssuerNamespaceLaggingSidecar(t *testing.T) {
	f := newNSFixture(t, nil)
	b := f.startB(t)
	if got := pingStatus(t, b.base, f.static); got != http.StatusOK {
		t.Fatalf("B's static token before any issuer was configured: %d, want 200", got)
	}
	pid := b.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	f.startA(t) // healthy: past its namespace entry and its wait
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, b.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+f.static)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- -1
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond) // the request waits in B's socket
	resume()
	if got := <-status; got == http.StatusOK {
		t.Errorf("B, resumed after A began to serve issuer idp:, took its static token as idp:bob (200) on a view of the log's namespaces older than A's wait")
	}
	// Once B has read the log, it refuses the token as before.
	waitFor(t, "B refuses static idp:bob", func() bool { return pingStatus(t, b.base, f.static) == http.StatusUnauthorized })
}
