package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
)

// TestJoinedCallOnStoppedSidecar: a joined stdio serve whose sidecar
// stops answering (here stopped, SIGSTOP: it takes connections and
// answers nothing) fails its client's call with an error saying so once
// the sidecar had as long as it gives any call (the config's longest
// server timeout, here 1 s) and a grace more, rather than leaving the
// client waiting without end. The call waited until the client gave up.
func TestJoinedCallOnStoppedSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	exe, _ := os.Executable()
	cfg := map[string]any{
		"data": filepath.Join(dir, "data"),
		"servers": []map[string]any{
			{"id": "fx", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: filepath.Join(dir, "fx.txt")}, "timeout": "1s"},
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
	defer sp.kill()
	ss, err := connectStdio(t, bin, t.TempDir(), "--config", cfgPath)
	if err != nil {
		t.Fatalf("the stdio serve did not join: %v", err)
	}
	callTool(t, ss, "create_task", map[string]any{"title": "before the stop"})
	if err := sp.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer sp.cmd.Process.Signal(syscall.SIGCONT)
	// SIGSTOP is delivered asynchronously: under load the sidecar answered
	// a call sent right after the kill returned (1.5 ms, in CI). Wait until
	// the kernel shows it stopped.
	if st := waitStopped(sp.cmd.Process.Pid, 10*time.Second); st != "T" {
		t.Fatalf("the sidecar is in state %q 10 s after SIGSTOP, not stopped (T)", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	_, err = ss.CallTool(ctx, &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "on a stopped sidecar"}})
	t.Logf("the call on the stopped sidecar ended after %s: %v", time.Since(start), err)
	if ctx.Err() != nil {
		t.Fatalf("the call on a stopped sidecar waited 90 s, until its client gave up: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("the call on a stopped sidecar: %v, want an error saying it did not answer", err)
	}
}

// waitStopped waits up to d for process pid to be stopped, and returns
// its state as /proc/PID/stat gives it (the field after the name).
func waitStopped(pid int, d time.Duration) string {
	state := ""
	for end := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return "unreadable: " + err.Error()
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			state = string(b[i+2 : i+3])
		}
		if state == "T" || time.Now().After(end) {
			return state
		}
	}
}
