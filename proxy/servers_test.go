package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServersLive: servers added and removed while the proxy runs appear
// at and leave the front of a session that stays open throughout; a
// removed stdio server's process exits; calls to an added one are
// recorded; an id that is taken is refused.
func TestServersLive(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "a")}, nil)
	cs := connectMemory(t, p, nil)
	ctx := context.Background()

	pidOf := func(tool string) int {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"ms": 0}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, err, res)
		}
		l.checkReceipt(t, metaReceipt(res.Meta))
		var pid int
		if _, err := fmt.Sscanf(textOf(res), "slept 0ms in pid %d", &pid); err != nil {
			t.Fatalf("%s said %q", tool, textOf(res))
		}
		return pid
	}
	waitTool := func(name string, want bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			has := slices.ContainsFunc(lt.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
			if has == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool %s listed: %v, want %v", name, has, want)
			}
		}
	}

	pidA := pidOf("a__sleep")
	if err := p.AddServer(fixtureServerConfig(t, "b")); err != nil {
		t.Fatal(err)
	}
	waitTool("b__sleep", true)
	pidB := pidOf("b__sleep")
	if pidB == pidA {
		t.Fatalf("b runs in a's process %d", pidA)
	}
	if err := p.AddServer(fixtureServerConfig(t, "b")); err == nil || !strings.Contains(err.Error(), `"b" is used twice`) {
		t.Errorf("adding b again: %v, want the id refused", err)
	}

	if err := p.RemoveServer("a"); err != nil {
		t.Fatal(err)
	}
	waitTool("a__sleep", false)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__sleep", Arguments: map[string]any{"ms": 0}}); err == nil && !res.IsError {
		t.Errorf("a removed server's tool still answers: %s", textOf(res))
	}
	if err := syscall.Kill(pidA, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the removed server's process %d: %v, want it gone", pidA, err)
	}
	var ids []string
	for _, h := range p.Downstreams() {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, []string{"b"}) {
		t.Errorf("Downstreams() %v, want [b]", ids)
	}
	if got := pidOf("b__sleep"); got != pidB {
		t.Errorf("b's process changed from %d to %d when a was removed", pidB, got)
	}
	if err := p.RemoveServer("a"); err == nil {
		t.Error("removing a twice: no error")
	}
	// a comes back under its id, as a new process.
	if err := p.AddServer(fixtureServerConfig(t, "a")); err != nil {
		t.Fatal(err)
	}
	waitTool("a__sleep", true)
	if got := pidOf("a__sleep"); got == pidA {
		t.Errorf("a re-added runs in its old process %d", pidA)
	}
}
