package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

type healthBody struct {
	Status  string    `json:"status"`
	Reasons []problem `json:"reasons"`
}

func getHealth(t *testing.T, base string) (healthBody, int) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h healthBody
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h, resp.StatusCode
}

func getMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// closedURL returns an http URL nothing listens on.
func closedURL(t *testing.T) string {
	return fmt.Sprintf("http://127.0.0.1:%d", proctest.FreePort(t))
}

// TestHealthOK: with nothing wrong, /healthz is ok and every health gauge 0.
func TestHealthOK(t *testing.T) {
	base, _ := startServe(t, "--data", filepath.Join(t.TempDir(), "d"))
	h, code := getHealth(t, base)
	if code != http.StatusOK || h.Status != "ok" || h.Reasons == nil || len(h.Reasons) != 0 {
		t.Fatalf("%d %+v", code, h)
	}
	m := getMetrics(t, base)
	for _, r := range healthReasons {
		if !strings.Contains(m, "\nprovlog_health_"+r+" 0\n") {
			t.Errorf("metrics lack provlog_health_%s 0:\n%s", r, m)
		}
	}
}

// TestHealthDegraded: a downstream that cannot start, a witness and a TSA
// that cannot be reached each make /healthz degraded with its reason
// (200: the log still records), and each reason's gauge 1.
func TestHealthDegraded(t *testing.T) {
	dir := t.TempDir()
	tsa := testtsa.New(t, "TSA")
	os.WriteFile(filepath.Join(dir, "tsa.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa.PKI.Root.Raw}), 0o600)
	w := witnesstest.NewCosigner(t, "witness.example/w1")
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`data: ./d
health: {anchor_gap_intervals: 1}
servers:
  - id: broken
    command: [/bin/false]
witnesses:
  - {url: %s, vkey: %q}
witness_policy: {threshold: 1}
anchors:
  interval: 1s
  timeout: 1s
  tsa:
    - {url: %s, roots: [tsa.pem]}
`, closedURL(t), w.Verifier().String(), closedURL(t))), 0o600)
	base, _ := startServe(t, "--config", cfg)
	want := []string{reasonDownstream, reasonAnchorGap, reasonAnchorAuth, reasonWitness}
	var h healthBody
	var code int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, code = getHealth(t, base)
		got := map[string]bool{}
		for _, r := range h.Reasons {
			got[r.Reason] = true
		}
		if !slices.ContainsFunc(want, func(r string) bool { return !got[r] }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d %+v", code, h)
		}
	}
	if code != http.StatusOK || h.Status != "degraded" {
		t.Fatalf("%d %+v", code, h)
	}
	for _, r := range h.Reasons {
		if r.Detail == "" {
			t.Errorf("reason %s has no detail", r.Reason)
		}
	}
	if !strings.Contains(fmt.Sprint(h.Reasons), `server "broken" is down`) {
		t.Errorf("the downstream reason does not name the server: %+v", h.Reasons)
	}
	m := getMetrics(t, base)
	for _, r := range want {
		if !strings.Contains(m, "\nprovlog_health_"+r+" 1\n") {
			t.Errorf("metrics lack provlog_health_%s 1:\n%s", r, m)
		}
	}
	if !strings.Contains(m, "\nprovlog_health_"+reasonStorage+" 0\n") {
		t.Errorf("storage reported failed:\n%s", m)
	}
}

// TestHealthStorageFailed: a full disk stops the log; /healthz says
// failed (503) with storage_failed, and its gauge is 1.
func TestHealthStorageFailed(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "16m")
	base, _ := startServe(t, "--data", filepath.Join(dir, "d"))
	tok, _ := os.ReadFile(filepath.Join(dir, "d", localToken))
	cs := connectHTTP(t, base, strings.TrimSpace(string(tok)))
	fill(t, dir)
	var h healthBody
	var code int
	for i := 0; ; i++ {
		cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_task", Arguments: map[string]any{"title": "t", "description": strings.Repeat("x", 3500)}})
		if h, code = getHealth(t, base); h.Status != "ok" {
			break
		}
		if i > 20000 {
			t.Fatalf("the log kept writing on a full disk: %+v", h)
		}
	}
	if code != http.StatusServiceUnavailable || h.Status != "failed" || len(h.Reasons) == 0 || h.Reasons[0].Reason != reasonStorage {
		t.Fatalf("%d %+v", code, h)
	}
	if m := getMetrics(t, base); !strings.Contains(m, "\nprovlog_health_"+reasonStorage+" 1\n") {
		t.Errorf("metrics:\n%s", m)
	}
}

// TestHealthBlobStoreFailing: while the blob store cannot be written (its
// directory made a file here; a full disk does the same), a call whose
// result is kept whole (retain: full) has it withheld, and /healthz says
// degraded with blob_store_failing (200: the log still records); once a
// blob is written again it is ok. Before, /healthz said ok throughout.
func TestHealthBlobStoreFailing(t *testing.T) {
	exe, _ := os.Executable()
	const token = "blob-health-token"
	sum := sha256.Sum256([]byte(token))
	data := filepath.Join(t.TempDir(), "data")
	cfg := fmt.Sprintf(`data: %s
origin: provlog.test/blobhealth
actors: [{id: alice, token_sha256: %s}]
servers:
  - id: lk
    command: [%q, "-test.run=^$"]
    env: {%s: "1"}
    retain: full
`, data, hex.EncodeToString(sum[:]), exe, leakfxEnv)
	sp, err := startFxSidecar(t, "--config", writeFile(t, filepath.Join(t.TempDir(), "provlog.yaml"), []byte(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.stop(t)
	waitTools(t, sp.base, token, []string{"lk__echo"})
	cs := connectHTTP(t, sp.base, token)
	echo := func(n int) error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lk__echo", Arguments: map[string]any{"token": fmt.Sprintf("tok-%d-9f3e2a", n)}})
		return err
	}
	if err := echo(1); err != nil {
		t.Fatalf("%v\n%s", err, sp.stderr.String())
	}
	blobDir := filepath.Join(data, blobDir)
	aside := blobDir + ".aside"
	if err := os.Rename(blobDir, aside); err != nil {
		t.Fatal(err)
	}
	writeFile(t, blobDir, []byte("not a directory"))
	if err := echo(2); err == nil || !strings.Contains(err.Error(), "withheld") {
		t.Errorf("a call whose result cannot be kept: %v, want its result withheld", err)
	}
	h, code := getHealth(t, sp.base)
	if code != http.StatusOK || h.Status != "degraded" || len(h.Reasons) != 1 || h.Reasons[0].Reason != reasonBlobs {
		t.Errorf("with the blob store failing: %d %+v, want degraded (200) with %s", code, h, reasonBlobs)
	}
	os.Remove(blobDir)
	if err := os.Rename(aside, blobDir); err != nil {
		t.Fatal(err)
	}
	if err := echo(3); err != nil {
		t.Fatal(err)
	}
	if h, code := getHealth(t, sp.base); code != http.StatusOK || h.Status != "ok" {
		t.Errorf("with the blob store back: %d %+v, want ok", code, h)
	}
}
