package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
)

// TestHealthSeesRekorUnlinked: the fake Rekor's consistency-proof
// endpoint goes down (503) after the first anchor, so the sidecar keeps
// its next Rekor entries without a proof from the one before (unlinked).
// Calls are still recorded and anchored: /healthz says 200, degraded,
// with reason rekor_unlinked naming the Rekor, and its gauge is 1. It
// said "ok", the unlinked entry told only in the authority's last_error.
func TestHealthSeesRekorUnlinked(t *testing.T) {
	testHealthRekorUnlinked(t, "without its consistency proof", func(_ *fakerekor.Rekor, proofDown *atomic.Bool) { proofDown.Store(true) })
}

// TestHealthSeesRekorNewTree: as TestHealthSeesRekorUnlinked, with the
// fake Rekor moved to a new tree (a new shard) after the first anchor.
func TestHealthSeesRekorNewTree(t *testing.T) {
	testHealthRekorUnlinked(t, "to a new one", func(rk *fakerekor.Rekor, _ *atomic.Bool) { rk.SetFault(fakerekor.NewTree) })
}

func testHealthRekorUnlinked(t *testing.T, said string, fault func(*fakerekor.Rekor, *atomic.Bool)) {
	rk := fakerekor.New(t)
	var proofDown atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if proofDown.Load() && r.URL.Path == "/api/v1/log/proof" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		rk.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rekor.pub"), rk.PublicKeyPEM(), 0o600)
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`data: ./d
health: {anchor_gap_intervals: 1000}
anchors:
  interval: 1s
  timeout: 5s
  rekor:
    url: %s
    public_key: rekor.pub
`, front.URL)), 0o600)
	base, _ := startServe(t, "--config", cfg)
	tok, _ := os.ReadFile(filepath.Join(dir, "d", localToken))
	cs := connectHTTP(t, base, strings.TrimSpace(string(tok)))
	anchoring := func() online.Status {
		var h struct {
			Anchoring online.Status `json:"anchoring"`
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&h)
		return h.Anchoring
	}
	waitFor(t, "the first anchor", func() bool { return anchoring().LastRecord != "" })
	fault(rk, &proofDown)
	n := 0
	waitFor(t, "a Rekor entry kept unlinked", func() bool {
		n++
		cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": fmt.Sprint("t", n), "description": "d"}})
		st := anchoring()
		return len(st.Authorities) == 1 && strings.Contains(st.Authorities[0].LastError, said)
	})
	h, code := getHealth(t, base)
	var found bool
	for _, r := range h.Reasons {
		if r.Reason == "rekor_unlinked" {
			found = strings.Contains(r.Detail, front.URL) || strings.Contains(r.Detail, strings.TrimPrefix(front.URL, "http://"))
		}
	}
	if code != http.StatusOK || h.Status != "degraded" || !found {
		t.Errorf("/healthz with a Rekor entry kept unlinked: %d %+v; want 200 degraded, reason rekor_unlinked naming the Rekor", code, h)
	}
	if st, _ := callTool(t, cs, "provlog__status", nil); !strings.Contains(fmt.Sprint(st), "rekor_unlinked") {
		t.Errorf("provlog__status names no rekor_unlinked reason: %v", st)
	}
	if m := getMetrics(t, base); !strings.Contains(m, "\nprovlog_health_rekor_unlinked 1\n") {
		t.Errorf("metrics lack provlog_health_rekor_unlinked 1")
	}
}
