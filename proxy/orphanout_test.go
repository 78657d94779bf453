//go:build linux

package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shServerConfig is the fixture started by sh running script, which
// names the fixture's command as "$0" "$@".
func shServerConfig(t *testing.T, id, script string) ServerConfig {
	cfg := fixtureServerConfig(t, id)
	cfg.Command = append([]string{"sh", "-c", script}, cfg.Command...)
	return cfg
}

// TestDownstreamExitOrphanHoldsStdout kills a stdio server whose command
// left a child of its own holding its stdout (sh -c 'sleep & exec
// server'): the pipe never ends, yet the process provlog started has
// exited, and its call in flight fails as a server's that exits outright
// does (TestDownstreamKilled), not at its timeout; the server is
// restarted.
func TestDownstreamExitOrphanHoldsStdout(t *testing.T) {
	l := newTestLog(t)
	cfg := shServerConfig(t, "victim", `sleep 300 & exec "$0" "$@"`)
	// Short, so that a run that waits for it ends soon; the outcome
	// recorded, not the time, tells.
	cfg.Timeout = 8 * time.Second
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	pid := killDuringCall(t, p, l, cs, "victim", &mcp.CallToolParams{Name: "victim__sleep", Arguments: map[string]any{"ms": 60000}})

	// It comes back, a new process.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "victim__sleep", Arguments: map[string]any{"ms": 1}})
		if err == nil && !res.IsError {
			if strings.Contains(textOf(res), fmt.Sprintf("pid %d", pid)) {
				t.Fatal("answered by the killed process")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := serverStatus(t, callStatus(t, cs), "victim"); st["state"] != StateUp || st["restarts"].(float64) < 1 {
		t.Errorf("status after the restart: %v", st)
	}
}

// TestDownstreamLauncherExits starts a stdio server through a launcher
// that backgrounds it on its own stdin and stdout (a shell gives a job it
// backgrounds /dev/null for stdin unless told otherwise) and exits at
// once: the launcher's exit, before the server said a word, is not the
// server's, and the server goes on serving, unrestarted.
func TestDownstreamLauncherExits(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{shServerConfig(t, "bg", `exec 3<&0; "$0" "$@" <&3 3<&- &`)}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()
	pidOf := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bg__sleep", Arguments: map[string]any{"ms": 1}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %v", err, res)
		}
		text := textOf(res)
		return text[strings.Index(text, "pid "):]
	}
	first := pidOf()
	// Long past the grace after an exit (exitGrace), so that a session
	// wrongly ended by the launcher's exit would have ended.
	time.Sleep(exitGrace + time.Second)
	if again := pidOf(); again != first {
		t.Fatalf("answered by %s, then by %s", first, again)
	}
	if st := serverStatus(t, callStatus(t, cs), "bg"); st["state"] != StateUp || st["restarts"].(float64) != 0 {
		t.Errorf("status: %v", st)
	}
}
