package proxy

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// heldTillNamed is the test log's blob store, whose holds note, when one
// ends, whether an entry of the log names the blob by then: a hold that
// ends before lets a purge delete the blob that entry will name.
type heldTillNamed struct {
	*blobs.Store
	l     *testLog
	t     *testing.T
	mu    sync.Mutex
	early []string
}

func (h *heldTillNamed) Hold(sum string) func() {
	release := h.Store.Hold(sum)
	return func() {
		if !h.named(sum) {
			h.mu.Lock()
			h.early = append(h.early, sum)
			h.mu.Unlock()
		}
		release()
	}
}

// named reports whether an entry of the log names blob sum.
func (h *heldTillNamed) named(sum string) bool {
	n := h.l.size(h.t)
	for i := range n {
		if e, err := log.ParseEntry(h.l.entry(h.t, i)); err == nil && strings.Contains(strings.Join(blobs.Refs(e), " "), sum) {
			return true
		}
	}
	return false
}

// TestParkedReadHoldsArgs: a 2026-07-28 client's prompts/get on a
// 2025-11-25 session (parked), whose arguments are too large for an
// entry and go to a blob, holds that blob against a purge until the
// leg's entry naming it is in the log, as every other entry's writer
// does. Before, the hold ended as soon as the read was parked, before the
// server's first round was recorded: a purge then could delete the blob
// the round's entry named a moment later.
func TestParkedReadHoldsArgs(t *testing.T) {
	l := newTestLog(t)
	h := &heldTillNamed{Store: l.blobs, l: l, t: t}
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, func(o *Options) { o.Blobs = h })
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	ctx := context.Background()
	// A path no file can have: the server notes nothing, but reads it.
	args := map[string]string{"path": filepath.Join(t.TempDir(), strings.Repeat("long/", 40000))}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args})
	if err != nil {
		t.Fatalf("prompts/get with large arguments: %v", err)
	}
	e := l.readReceipt(t, gp.Meta, log.KindPromptGet)
	if e.ArgsSHA256 == "" {
		t.Fatalf("the read's entry keeps its arguments (%d bytes): they did not go to a blob", len(e.Args))
	}
	if ok, err := l.blobs.Has(e.ArgsSHA256); !ok || err != nil {
		t.Fatalf("the arguments' blob %s is not there: %v", e.ArgsSHA256[:12], err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.early) > 0 {
		t.Errorf("holds on blobs %v ended before any entry of the log named them", h.early)
	}
}
