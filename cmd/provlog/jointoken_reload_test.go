package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/durable"
)

// TestJoinAfterLocalTokenReload: local.token rotated while the sidecar
// runs (a new token written over it, then SIGHUP) is the stdio actor's
// token from that reload on: a stdio serve with the new token joins the
// sidecar, one with the old token is refused naming local.token, and
// sidecar.json, which tells joiners the token's hash, stays 0600.
func TestJoinAfterLocalTokenReload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	bin := cmdtest.Build(t, "provlog")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: "+data+"\nreload_interval: 0s\n"), 0o600)
	addToken(t, cfg, "alice")
	sp, err := startFxSidecar(t, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.stop(t)
	tokPath := filepath.Join(data, localToken)
	old, err := os.ReadFile(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	rotated := base64.RawURLEncoding.EncodeToString(raw)
	if err := durable.WriteFile(tokPath, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sp.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rotated local.token works after SIGHUP", func() bool { return tokenWorks(t, sp.base, rotated) })
	if tokenWorks(t, sp.base, strings.TrimSpace(string(old))) {
		t.Fatal("the old local.token still works after the reload")
	}

	ss, err := connectStdio(t, bin, t.TempDir(), "--config", cfg)
	if err != nil {
		t.Fatalf("a stdio serve with the reloaded local.token was refused: %v", err)
	}
	if got, rc := callTool(t, ss, "create_task", map[string]any{"title": "after the rotation"}); rc == "" {
		b, _ := json.Marshal(got)
		t.Fatalf("the joined call carries no receipt: %s", b)
	}
	ss.Close()
	fi, err := os.Stat(filepath.Join(data, sidecarFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s after the reload: %v, %v; want mode 0600", sidecarFile, fi, err)
	}

	// The old token, written back: the sidecar no longer takes it.
	if err := durable.WriteFile(tokPath, old, 0o600); err != nil {
		t.Fatal(err)
	}
	ss, err = connectStdio(t, bin, t.TempDir(), "--config", cfg)
	if err == nil {
		ss.Close()
		t.Fatalf("a stdio serve with the local.token of before the reload joined")
	}
	if !strings.Contains(err.Error(), localToken) {
		t.Errorf("the refusal of the old token does not name %s: %v", localToken, err)
	}
	sp.alive(t)
}

// TestLocalTokenReloadOnFullDisk: a reload that takes a new local.token
// while sidecar.json cannot be written again (its file system is full)
// fails, saying so: the old token stays the one the sidecar takes and the
// one sidecar.json names. Once there is room, a reload takes the new one.
func TestLocalTokenReloadOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped in -short")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	mountTmpfs(t, data, "64m")
	cfg := filepath.Join(dir, "servers.yaml")
	os.WriteFile(cfg, []byte("data: "+data+"\nreload_interval: 0s\n"), 0o600)
	sp, err := startFxSidecar(t, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.stop(t)
	tokPath := filepath.Join(data, localToken)
	old, err := os.ReadFile(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	rotated := "rotated-" + strings.Repeat("x", 40)
	if err := durable.WriteFile(tokPath, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hashIn := func() string {
		info, _, err := readSidecar(data)
		if err != nil {
			t.Fatal(err)
		}
		return info.TokenSHA256
	}
	filler := fill(t, data)
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the reload fails", func() bool { return strings.Contains(sp.stderr.String(), "config reload failed") })
	if s := sp.stderr.String(); !strings.Contains(s, sidecarFile) {
		t.Errorf("the failed reload does not name %s: %s", sidecarFile, s)
	}
	if !tokenWorks(t, sp.base, strings.TrimSpace(string(old))) || tokenWorks(t, sp.base, rotated) {
		t.Error("a reload that could not write sidecar.json changed the token the sidecar takes")
	}
	if hashIn() != hashLocalToken(old) {
		t.Errorf("%s does not name the old token after the failed reload", sidecarFile)
	}
	if strings.Contains(sp.stderr.String(), rotated) || strings.Contains(sp.stderr.String(), strings.TrimSpace(string(old))) {
		t.Error("a token is on the sidecar's stderr")
	}

	os.Remove(filler)
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the rotated local.token works after the second SIGHUP", func() bool { return tokenWorks(t, sp.base, rotated) })
	if hashIn() != hashLocalToken([]byte(rotated)) {
		t.Errorf("%s does not name the rotated token", sidecarFile)
	}
	sp.alive(t)
}
