package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/online"
)

// TestAnchorCommands: serve anchors at start and lists the anchors at
// /log/anchors and in its status; `provlog anchor` anchors a stopped
// sidecar's log; `provlog audit` verifies every anchor offline, and names
// what broke after a stored token is changed.
func TestAnchorCommands(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	tsa0, tsa1 := testtsa.New(t, "TSA 0"), testtsa.New(t, "TSA 1")
	rk := fakerekor.New(t)
	for name, b := range map[string][]byte{
		"tsa0.pem":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa0.PKI.Root.Raw}),
		"tsa1.pem":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tsa1.PKI.Root.Raw}),
		"rekor.pub": rk.PublicKeyPEM(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "provlog.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`data: %s
anchors:
  interval: 1h
  timeout: 5s
  tsa:
    - url: %s
      roots: [tsa0.pem]
    - url: %s
      roots: [tsa1.pem]
  rekor:
    url: %s
    public_key: rekor.pub
`, data, tsa0.URL, tsa1.URL, rk.URL)), 0o600)

	base, stop := startServe(t, "--config", cfg)
	token, _ := os.ReadFile(filepath.Join(data, localToken))
	hc := &http.Client{Transport: bearer{strings.TrimSpace(string(token))}}
	var health struct {
		Anchoring online.Status `json:"anchoring"`
	}
	for deadline := time.Now().Add(10 * time.Second); health.Anchoring.LastRecord == ""; {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&health)
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("no anchor at start: %+v", health)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := health.Anchoring; len(a.Authorities) != 3 || a.LastError != "" || a.Unanchored != 0 {
		t.Errorf("anchoring status: %+v", a)
	}
	resp, err := hc.Get(base + "/log/anchors")
	if err != nil {
		t.Fatal(err)
	}
	var list []online.Summary
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list) != 1 || len(list[0].Timestamps) != 2 || len(list[0].Tlogs) != 1 {
		t.Fatalf("/log/anchors: %+v", list)
	}
	if resp, _ := http.Get(base + "/log/anchors"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/log/anchors without a token: %d", resp.StatusCode)
	}
	resp, _ = http.Get(base + "/metrics")
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("provlog_anchor_gap_seconds 0")) {
		t.Errorf("metrics:\n%s", metrics)
	}
	stop()

	out, code := runCmd(t, "anchor", "--config", cfg)
	if code != 0 || !strings.Contains(out, "anchored size") {
		t.Fatalf("provlog anchor: %d\n%s", code, out)
	}
	out, code = runCmd(t, "audit", "--data", data, "--config", cfg)
	if code != 0 || !strings.Contains(out, "OK: 2 anchors verified offline (4 timestamps, 2 Rekor entries, 2 anchor entries in the log) against configured") {
		t.Fatalf("provlog audit: %d\n%s", code, out)
	}
	out, code = runCmd(t, "audit", "--data", data)
	if code != 0 || !strings.Contains(out, "stored in the records (pass --config to pin them)") {
		t.Fatalf("provlog audit without config: %d\n%s", code, out)
	}
	// Records deleted from the oldest on, or all of them with their
	// directory, are named by the log's anchor entries: audit passed.
	records, _ := filepath.Glob(filepath.Join(data, anchorDir, "*.json"))
	if len(records) < 2 {
		t.Fatalf("%d anchor records, want 2", len(records))
	}
	saved := filepath.Join(t.TempDir(), "anchors")
	os.CopyFS(saved, os.DirFS(filepath.Join(data, anchorDir)))
	for _, drop := range [][]string{records[:1], records} {
		for _, r := range drop {
			os.Remove(r)
		}
		if len(drop) == len(records) {
			os.Remove(filepath.Join(data, anchorDir))
		}
		out, code = runCmd(t, "audit", "--data", data, "--config", cfg)
		if code == 0 || !strings.Contains(out, filepath.Base(drop[0])+", which is not stored") {
			t.Errorf("audit with %d of %d anchor records deleted: %d\n%s", len(drop), len(records), code, out)
		}
		os.RemoveAll(filepath.Join(data, anchorDir))
		os.CopyFS(filepath.Join(data, anchorDir), os.DirFS(saved))
	}
	if out, code := runCmd(t, "audit", "--data", data, "--config", cfg); code != 0 {
		t.Fatalf("audit with the records back: %d\n%s", code, out)
	}
	// A logged record changed on disk is not logged again under its new
	// hash: anchoring refuses, naming it (a restart signed a second
	// entry over the changed file).
	newest := records[len(records)-1]
	orig, _ := os.ReadFile(newest)
	os.WriteFile(newest, append(bytes.Clone(orig), '\n'), 0o644)
	out, code = runCmd(t, "anchor", "--config", cfg)
	if code == 0 || !strings.Contains(out, filepath.Base(newest)+" changed after it was logged") {
		t.Errorf("anchoring over a changed record: %d\n%s", code, out)
	}
	os.WriteFile(newest, orig, 0o644)
	// Another log's anchoring key is refused before anything is anchored:
	// it anchored, and the audit then failed on its records.
	other := t.TempDir()
	if out, code := runCmd(t, "keygen", "--data", other); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	own, _ := os.ReadFile(filepath.Join(data, anchorKeyFile))
	foreign, _ := os.ReadFile(filepath.Join(other, anchorKeyFile))
	os.WriteFile(filepath.Join(data, anchorKeyFile), foreign, 0o600)
	anchorsBefore, _ := os.ReadDir(filepath.Join(data, anchorDir))
	out, code = runCmd(t, "anchor", "--config", cfg)
	if code == 0 || !strings.Contains(out, "is not the anchoring key this log's genesis entry names") {
		t.Errorf("provlog anchor with another log's anchoring key: %d\n%s", code, out)
	}
	if after, _ := os.ReadDir(filepath.Join(data, anchorDir)); len(after) != len(anchorsBefore) {
		t.Errorf("a refused anchoring key wrote %d anchor records", len(after)-len(anchorsBefore))
	}
	os.WriteFile(filepath.Join(data, anchorKeyFile), own, 0o600)
	// A damaged log.vkey is named as such, not as a --vkey flag nobody gave.
	vk, _ := os.ReadFile(filepath.Join(data, logVKeyFile))
	os.WriteFile(filepath.Join(data, logVKeyFile), []byte("not a key"), 0o644)
	out, code = runCmd(t, "audit", "--data", data)
	if code == 0 || !strings.Contains(out, filepath.Join(data, logVKeyFile)+" is not a verifier key") {
		t.Errorf("audit with a damaged log.vkey: %d\n%s", code, out)
	}
	os.WriteFile(filepath.Join(data, logVKeyFile), vk, 0o644)
	// A config without anchors: pins nothing, and audit says why rather
	// than asking for the --config it was given.
	bare := filepath.Join(t.TempDir(), "bare.yaml")
	os.WriteFile(bare, []byte("data: "+data+"\n"), 0o600)
	out, code = runCmd(t, "audit", "--data", data, "--config", bare)
	if code != 0 || !strings.Contains(out, bare+" has no anchors: section to pin them") || strings.Contains(out, "pass --config") {
		t.Fatalf("provlog audit with a config without anchors: %d\n%s", code, out)
	}

	// Change one byte of the first stored token.
	recs, _ := filepath.Glob(filepath.Join(data, "anchors", "*.json"))
	b, _ := os.ReadFile(recs[0])
	rec, err := anchor.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	tok := rec.Timestamps[0].Token
	tok[len(tok)-5] ^= 1
	b, _ = rec.Marshal()
	os.WriteFile(recs[0], b, 0o600)
	out, code = runCmd(t, "audit", "--data", data, "--config", cfg)
	if code != 1 || !strings.Contains(out, "timestamp 0 ("+tsa0.URL+")") {
		t.Fatalf("audit after tampering: %d\n%s", code, out)
	}
}
