//go:build unix

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/proxy/authn/authntest"
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

// TestIssuerNamespaceReloadKeepsStatic: a sidecar of a shared log
// reloaded with a new issuer waits 2s for the other sidecars to read its
// namespace entry; its own follower keeps reading the log meanwhile, so
// its static token carol, in no issuer's namespace, is taken all along
// (a follower held up by the wait would leave the sidecar's view of the
// namespaces over 2s old, and carol refused).
func TestIssuerNamespaceReloadKeepsStatic(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	datas := sharedDataDirs(t, dir)
	is := authntest.Start(t)
	addr := freeAddr(t)
	cfgPath := filepath.Join(dir, "provlog.yaml")
	carol := "static-token-for-carol-0123456789"
	sum := sha256.Sum256([]byte(carol))
	write := func(cfg map[string]any) {
		cfg["reload_interval"] = "50ms"
		cfg["actors"] = []map[string]any{{"id": "carol", "token_sha256": hex.EncodeToString(sum[:])}}
		b, _ := json.Marshal(cfg) // JSON is YAML
		writeFile(t, cfgPath+".new", b)
		if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{})
	base, stop, logs := startServeLogged(t, addr, "--config", cfgPath, "--data", datas[0], "--store", dsn)
	write(map[string]any{"auth": map[string]any{"resource": "http://" + addr + "/mcp",
		"issuers": []map[string]any{{"issuer": is.URL, "jwks_url": is.JWKSURL(), "actor_prefix": "idp:"}}}})
	refused, tries := 0, 0
	for !strings.Contains(logs.String(), "config reload") {
		if pingStatus(t, base, carol) != http.StatusOK {
			refused++
		}
		tries++
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if !strings.Contains(logs.String(), "config reloaded") {
		t.Fatalf("the reload adding issuer idp: failed:\n%s", logs.String())
	}
	if refused > 0 {
		t.Errorf("static carol refused %d of %d times while the sidecar reloaded with a new issuer", refused, tries)
	}
}
