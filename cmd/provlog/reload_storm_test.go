package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReloadStormUnderCalls: 50 SIGHUP reloads in a row (servers'
// commands swapped, redaction added, a server removed, an invalid
// config) while three clients, one of them of the newest revision, call
// both servers. Every call must end (answered, refused or cut by the
// drain) and every reload's servers be applied: a call that waits for a
// stdio server's newer-revision session, whose start waits for the
// catalogue its drain holds, must not hold that drain, the reload
// goroutine and itself for ever.
func TestReloadStormUnderCalls(t *testing.T) {
	dir := t.TempDir()
	exe, _ := os.Executable()
	const token = "probe-token"
	sum := sha256.Sum256([]byte(token))
	cfgPath := filepath.Join(dir, "provlog.yaml")
	srv := func(id, file string, redact bool) map[string]any {
		m := map[string]any{"id": id, "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, file)}}
		if redact {
			m["redact"] = []string{"secret"}
		}
		return m
	}
	write := func(servers ...map[string]any) {
		b, _ := json.Marshal(map[string]any{"data": filepath.Join(dir, "d"), "reload_interval": "0s", "drain_timeout": "5s", "servers": servers,
			"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}}})
		os.WriteFile(cfgPath, b, 0o600) // non-atomic on purpose
	}
	write(srv("a", "a.txt", false), srv("b", "b.txt", false))
	base, stop, stderr := startServeLogged(t, freeAddr(t), "--config", cfgPath)
	ctx := context.Background()
	var okCalls, errCalls atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	var emu sync.Mutex
	errSamples := map[string]int{}
	for i := range 3 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "p", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				tool := []string{"a__append", "b__append"}[n%2]
				text := fmt.Sprintf("c%d-%d", i, n)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text, "secret": "S3CRET-" + text, "sleep_ms": n % 50}})
				if err != nil || res.IsError {
					errCalls.Add(1)
					msg := fmt.Sprint(err)
					if res != nil {
						msg = contentText(res)
					}
					if len(msg) > 60 {
						msg = msg[:60]
					}
					emu.Lock()
					errSamples[msg]++
					emu.Unlock()
					continue
				}
				okCalls.Add(1)
			}
		})
	}
	for r := range 50 {
		switch r % 4 {
		case 0:
			write(srv("a", "b.txt", false), srv("b", "a.txt", false)) // swapped
		case 1:
			write(srv("a", "a.txt", true), srv("b", "b.txt", true)) // redact added
		case 2:
			write(srv("a", "a.txt", true)) // b removed
		case 3:
			write(srv("a", "a.txt", true), srv("b", "b.txt", true), map[string]any{"id": "c", "url": "not a url"}) // invalid halfway
		}
		syscall.Kill(os.Getpid(), syscall.SIGHUP)
		waitFor(t, "reload", func() bool { return strings.Count(stderr.String(), "msg=\"config reload") > r })
	}
	write(srv("a", "a.txt", true), srv("b", "b.txt", true))
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	close(done)
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	waitFor(t, "every client's last call ends", func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	})
	stop()
	lines := 0
	for _, f := range []string{"a.txt", "b.txt"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		lines += strings.Count(string(b), "\n")
	}
	calls := 0
	for _, e := range readAll(t, filepath.Join(dir, "d")) {
		if e["kind"] == "call" {
			calls++
		}
	}
	t.Logf("ok=%d err=%d sidefx lines=%d call entries=%d errs=%v", okCalls.Load(), errCalls.Load(), lines, calls, errSamples)
	if lines > calls {
		t.Errorf("%d side effects, %d call entries: a call reached a server unrecorded", lines, calls)
	}
	if strings.Contains(stderr.String(), "S3CRET") {
		t.Error("a redacted value reached stderr")
	}
	if out, code := runCmd(t, "audit", "--data", filepath.Join(dir, "d")); code != 0 {
		t.Errorf("audit: %s", out)
	}
}
