//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is, with forkfxEnv set, a stdio MCP server whose tool
// "spawn" starts a worker (the test binary again, with forkfxWorkerEnv)
// and holds its call; the worker, whose stdin is /dev/null, appends a
// line to the file forkfxEnv names every 5 ms without end, and ignores
// SIGTERM and SIGHUP; it writes its pid to the file forkfxPidEnv names.
// With forkfxSetsidEnv set the worker leaves the server's process group
// and session (setsid); with forkfxDaemonEnv set too it is started by a
// shell that exits at once (sh -c 'setsid worker &'), as a daemon is,
// and is orphaned.
const (
	forkfxEnv       = "PROVLOG_TEST_FORKFX_FILE"
	forkfxPidEnv    = "PROVLOG_TEST_FORKFX_PID"
	forkfxSetsidEnv = "PROVLOG_TEST_FORKFX_SETSID"
	forkfxDaemonEnv = "PROVLOG_TEST_FORKFX_DAEMON"
	forkfxWorkerEnv = "PROVLOG_TEST_FORKFX_WORKER"
)

// forkfxChild runs the test binary as forkfx's server or worker, if it
// was started as one (TestMain, crash_test.go), and reports whether it
// did.
func forkfxChild() bool {
	if file := os.Getenv(forkfxWorkerEnv); file != "" {
		forkfxWorker(file)
		return true
	}
	if os.Getenv(forkfxEnv) != "" {
		forkfxServer()
		return true
	}
	return false
}

func forkfxWorker(file string) {
	os.WriteFile(os.Getenv(forkfxPidEnv), []byte(strconv.Itoa(os.Getpid())), 0o600)
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
	for i := 0; ; i++ {
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "effect %d\n", i)
			f.Close()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func forkfxServer() {
	file := os.Getenv(forkfxEnv)
	s := mcp.NewServer(&mcp.Implementation{Name: "forkfx", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "spawn", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		exe, _ := os.Executable()
		w := exec.Command(exe, "-test.run=^$")
		if os.Getenv(forkfxDaemonEnv) != "" {
			w = exec.Command("sh", "-c", `setsid "$0" "$@" </dev/null >/dev/null 2>&1 &`, exe, "-test.run=^$")
		}
		w.Env = append(os.Environ(), forkfxWorkerEnv+"="+file, forkfxEnv+"=")
		w.SysProcAttr = &syscall.SysProcAttr{Setsid: os.Getenv(forkfxSetsidEnv) != ""}
		if err := w.Start(); err != nil {
			return nil, err
		}
		go w.Wait()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.Run(context.Background(), &mcp.StdioTransport{})
}

// TestDescendantsDieWithSidecar: what a stdio server starts dies with the
// sidecar too, when a kill -9 of the sidecar comes in the middle of a
// call, when a reload removes the server, and when the sidecar stops
// (SIGTERM): a worker the server forked
// (one that left its process group by setsid too), which ignores the end
// of its stdin, makes no side effect that no sidecar records. Only the
// server itself died: its worker, reparented to init, appended on
// without end.
func TestDescendantsDieWithSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	for _, c := range []struct {
		name           string
		setsid, daemon bool
		end            string // how the server ends: the sidecar's kill -9, a reload that removes it, the sidecar's stop
	}{
		{"kill", false, false, "kill"},
		{"kill-setsid", true, false, "kill"},
		{"kill-daemon", true, true, "kill"},
		{"reload", false, false, "reload"},
		{"reload-setsid", true, false, "reload"},
		{"reload-daemon", true, true, "reload"},
		{"stop-daemon", true, true, "stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			descendantEnds(t, c.setsid, c.daemon, c.end)
		})
	}
}

func descendantEnds(t *testing.T, setsid, daemon bool, end string) {
	dir := t.TempDir()
	effects, pidFile := filepath.Join(dir, "effects.txt"), filepath.Join(dir, "pid")
	exe, _ := os.Executable()
	const token = "reaper-test-token"
	sum := sha256.Sum256([]byte(token))
	env := map[string]string{forkfxEnv: effects, forkfxPidEnv: pidFile}
	if setsid {
		env[forkfxSetsidEnv] = "1"
	}
	if daemon {
		env[forkfxDaemonEnv] = "1"
	}
	cfg := map[string]any{
		"data":            filepath.Join(dir, "data"),
		"reload_interval": "50ms",
		"drain_timeout":   "300ms",
		"actors":          []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		"servers": []map[string]any{
			{"id": "fk", "command": []string{exe, "-test.run=^$"}, "env": env},
		},
	}
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cb, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := startFxSidecar(t, "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var killOnce sync.Once
	kill := func() { killOnce.Do(sp.kill) }
	t.Cleanup(kill)
	waitTools(t, sp.base, token, []string{"fk__spawn"})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reaper", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: sp.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fk__spawn", Arguments: json.RawMessage(`{}`)})
	for deadline := time.Now().Add(20 * time.Second); countLines(effects) < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the downstream's worker")
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("the worker's pid file: %q", b)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	switch end {
	case "reload":
		cfg["servers"] = []map[string]any{}
		cb, _ := json.Marshal(cfg)
		if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
			t.Fatal(err)
		}
	case "stop":
		killOnce.Do(func() { sp.stop(t) })
	default:
		kill()
	}
	atEnd, ended := countLines(effects), time.Now()
	for deadline := time.Now().Add(20 * time.Second); !processGone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's worker (pid %d) ran on 20 s after the server's end, with %d side effects since that no sidecar recorded", pid, countLines(effects)-atEnd)
		}
	}
	atGone := countLines(effects)
	t.Logf("the worker was gone %s after the server's end, %d side effects since", time.Since(ended), atGone-atEnd)
	// Nothing of it goes on once it is gone (how soon the keeper killed
	// it, logged above, is no wall-clock bound asserted here).
	time.Sleep(100 * time.Millisecond)
	if n := countLines(effects) - atGone; n > 0 {
		t.Errorf("%d side effects after the worker was gone", n)
	}
}
