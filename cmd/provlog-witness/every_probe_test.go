package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provlog/provlog/witness/witnesstest"
)

// TestProbeCheckEveryStopsOnBlip: `provlog-witness check --every D`
// checks "again at this interval until interrupted". One failed fetch of
// the log's checkpoint (a 503 while the log restarts, a network blip)
// ends the loop: runCheck returns the error and the command exits 1, so
// the log is no longer watched at all until someone restarts the
// monitor. A monitor that stops on the first transient fault is one a
// forking log only has to make blink.
//
// Observed: with the first /checkpoint answered 503, check --every 20ms
// exits 1 ("checking …: fetching the checkpoint: … 503") after one
// request.
//
// Cause: cmd/provlog-witness/check.go runCheck returns on any error that
// carries no evidence. Fix: with --every, report the error (stderr, and a
// non-zero exit only when interrupted after failures, or after N in a
// row) and keep checking; stop only on a fork or rollback.
func TestProbeCheckEveryStopsOnBlip(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/blip")
	l := witnesstest.NewLog(t, k, "honest")
	l.Grow(t, 5)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/checkpoint") && n.Add(1) == 1 {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		l.Server.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	vkeyFile := filepath.Join(t.TempDir(), "log.vkey")
	os.WriteFile(vkeyFile, []byte(k.VKey+"\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"check", "--log", srv.URL + "/log/", "--vkey", vkeyFile, "--data", t.TempDir(), "--every", "20ms"}, &stdout, &stderr)
	}()
	for {
		select {
		case code := <-done:
			t.Fatalf("check --every ended after %d checkpoint fetches (exit %d): %s", n.Load(), code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if n.Load() >= 3 {
			cancel()
			<-done
			return
		}
	}
}
