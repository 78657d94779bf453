//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tickfxEnv makes the test binary a stdio MCP server whose tool "tick"
// appends a line to the file this names every 10 ms until the server is
// killed, and holds its call; the server writes its pid to the file
// tickfxPidEnv names, and lingers after its stdin ends (as a node server
// does while a timer of its runs).
const (
	tickfxEnv    = "PROVLOG_TEST_TICKFX_FILE"
	tickfxPidEnv = "PROVLOG_TEST_TICKFX_PID"
)

func tickfxChild() bool {
	file := os.Getenv(tickfxEnv)
	if file == "" {
		return false
	}
	os.WriteFile(os.Getenv(tickfxPidEnv), []byte(strconv.Itoa(os.Getpid())), 0o600)
	s := mcp.NewServer(&mcp.Implementation{Name: "tickfx", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "tick", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		go func() {
			for i := 0; ; i++ {
				f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					fmt.Fprintf(f, "tick %d\n", i)
					f.Close()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.Run(context.Background(), &mcp.StdioTransport{})
	select {} // its stdin ended: it lingers, ticking
}

// TestDownstreamDiesWithSidecar: a kill -9 of the sidecar in the middle
// of a call kills the stdio server it started, so that no side effect
// happens that no sidecar records. The server went on: here one that
// lingers after its stdin ends (a go-sdk server exits then, ~1.5 s
// later) ticked on without end.
func TestDownstreamDiesWithSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	dir := t.TempDir()
	effects, pidFile := filepath.Join(dir, "ticks.txt"), filepath.Join(dir, "pid")
	exe, _ := os.Executable()
	const token = "downkill-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg := map[string]any{
		"data":   filepath.Join(dir, "data"),
		"actors": []map[string]any{{"id": "alice", "token_sha256": hex.EncodeToString(sum[:])}},
		"servers": []map[string]any{
			{"id": "tk", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{tickfxEnv: effects, tickfxPidEnv: pidFile}},
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
	waitTools(t, sp.base, token, []string{"tk__tick"})
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "downkill", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: sp.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tk__tick", Arguments: json.RawMessage(`{}`)})
	for deadline := time.Now().Add(20 * time.Second); countLines(effects) < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the downstream")
		}
	}
	sp.kill()
	atKill, killed := countLines(effects), time.Now()
	for deadline := time.Now().Add(20 * time.Second); !processGone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the downstream (pid %d) ran on 20 s after the sidecar's kill -9, with %d side effects since that no sidecar recorded", pid, countLines(effects)-atKill)
		}
	}
	t.Logf("the downstream was gone %s after the kill, %d side effects since", time.Since(killed), countLines(effects)-atKill)
	// One write may have been under way as the kill came.
	if n := countLines(effects) - atKill; n > 1 {
		t.Errorf("%d side effects after the sidecar's kill -9, want at most 1", n)
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// processGone reports whether pid has exited (a zombie left unreaped
// has).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
