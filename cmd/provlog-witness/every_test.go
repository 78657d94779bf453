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

// TestCheckEveryGoesOnAfterBlip: `provlog-witness check --every D` checks
// again at this interval until interrupted. One failed fetch of the log's
// checkpoint (a 503 while the log restarts, a network blip) is reported
// and the checks go on: a monitor that stopped on the first transient
// fault is one a forking log only has to make blink. Only a fork or a
// rollback ends it.
func TestCheckEveryGoesOnAfterBlip(t *testing.T) {
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
			if code := <-done; code != 0 {
				t.Errorf("interrupted after a successful check: exit %d: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "503") {
				t.Errorf("the failed check is not reported: %q", stderr.String())
			}
			return
		}
	}
}
