package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/client"
	"github.com/provlog/provlog/witness/witnesstest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "witness.key")
	code, out, errOut := runCmd(t, "keygen", "--name", "witness.example/w1", "--key", key)
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, errOut)
	}
	vkey := strings.TrimSpace(out)
	v, err := log.NewCosignatureVerifier(vkey)
	if err != nil || v.Name() != "witness.example/w1" {
		t.Fatalf("keygen printed %q: %v", out, err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if code, out, _ := runCmd(t, "vkey", "--key", key); code != 0 || strings.TrimSpace(out) != vkey {
		t.Errorf("vkey: %d %q, want %q", code, out, vkey)
	}
	if code, _, errOut := runCmd(t, "keygen", "--name", "witness.example/w1", "--key", key); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("keygen over an existing key: %d %s", code, errOut)
	}
	for _, args := range [][]string{
		{"keygen", "--name", "w"},
		{"keygen", "--key", filepath.Join(dir, "k2")},
		{"serve", "--http", "localhost:0"},
		{"check", "--log", "http://x"},
		{"vkey", "--key", key, "extra"},
		{"nonsense"},
		{},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := runCmd(t, "keygen", "--name", "bad name", "--key", filepath.Join(dir, "k3")); code != 1 || !strings.Contains(errOut, "invalid key name") {
		t.Errorf("keygen with a bad name: %d %s", code, errOut)
	}
}

// witnessSetup makes a key and a config for the log with key k.
func witnessSetup(t *testing.T, k witnesstest.Key) (cfgPath, vkey string) {
	t.Helper()
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "keygen", "--name", "witness.example/w1", "--key", filepath.Join(dir, "witness.key"))
	if code != 0 {
		t.Fatal(errOut)
	}
	cfg := fmt.Sprintf("key: witness.key\ndata: state\nlogs:\n  - origin: %s\n    vkeys: [%q]\n", k.Verifier.Name(), k.VKey)
	cfgPath = filepath.Join(dir, "witness.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, strings.TrimSpace(out)
}

var addrRE = regexp.MustCompile(`addr=(\S+)`)

// serve runs the serve command until the returned stop function is called,
// and returns the address it listens on.
func serve(t *testing.T, cfgPath string) (string, *proctest.Buffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgPath, "--http", "127.0.0.1:0"}, &bytes.Buffer{}, &stderr)
	}()
	// Listening on port 0, serve says where only in its log.
	var addr string
	cmdtest.WaitUp(t, func() bool {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, done, &stderr)
	return addr, &stderr, func() int { cancel(); return <-done }
}

func TestServe(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, "log.example/served")
	l := witnesstest.NewLog(t, k, "honest")
	cfgPath, vkey := witnessSetup(t, k)
	v, _ := log.NewCosignatureVerifier(vkey)

	addr, stderr, stop := serve(t, cfgPath)
	h, err := client.NewHTTP("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := client.NewWitness(h, v, l.Store)
	for _, n := range []uint64{3, 10, 11} {
		if _, err := w.Cosign(ctx, l.Grow(t, n)); err != nil {
			t.Fatalf("Cosign at %d: %v", n, err)
		}
	}
	// A fork at the recorded size writes evidence into the data dir.
	evil := witnesstest.NewLog(t, k, "evil")
	_, err = client.NewWitness(h, v, evil.Store).Cosign(ctx, evil.Grow(t, 11))
	if _, ok := err.(*client.ConflictError); !ok {
		t.Fatalf("evil twin: %v, want a ConflictError", err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "shutting down") || !strings.Contains(stderr.String(), "LOG FORK") {
		t.Errorf("serve's log: %s", stderr)
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(cfgPath), "state", "evidence", "*-fork-*.json"))
	if len(files) != 1 {
		t.Fatalf("evidence files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	ev, err := witness.ParseEvidence(b)
	if err != nil || ev.Verify(k.Verifier) != nil {
		t.Fatalf("evidence file: %v", err)
	}

	// After a restart the witness still knows size 11.
	addr, _, stop = serve(t, cfgPath)
	h, _ = client.NewHTTP("http://"+addr, nil)
	w = client.NewWitness(h, v, l.Store)
	if _, err := w.Cosign(ctx, l.Grow(t, 12)); err != nil || w.Size() != 12 {
		t.Fatalf("after restart: %v", err)
	}
	stop()
}

func TestServeConfigErrors(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/c")
	cfgPath, _ := witnessSetup(t, k)
	dir := filepath.Dir(cfgPath)
	for _, tc := range []struct{ cfg, want string }{
		{"key: witness.key\ndata: d\n", "no log configured"},
		{"data: d\nlogs: [{origin: a, vkeys: [x]}]\n", "key: the witness key file is required"},
		{"key: witness.key\nlogs: [{origin: a, vkeys: [x]}]\n", "data: the state directory is required"},
		{"key: witness.key\ndata: d\nlogs: [{origin: a, vkeys: [x]}]\n", "vkey \"x\""},
		{"key: witness.key\ndata: d\nlogs: [{origin: other, vkeys: [\"" + k.VKey + "\"]}]\n", "is named \"log.example/c\""},
		{"key: witness.key\ndata: d\nlogs: [{origin: log.example/c}]\n", "at least one verifier key"},
		{"key: witness.key\ndata: d\nlogs: [{origin: log.example/c, vkeys: [\"" + k.VKey + "\"]}, {origin: log.example/c, vkeys: [\"" + k.VKey + "\"]}]\n", "configured twice"},
		{"key: witness.key\ndata: d\nlogz: []\n", "field logz not found"},
		{"key: missing.key\ndata: d\nlogs: [{origin: log.example/c, vkeys: [\"" + k.VKey + "\"]}]\n", "reading the witness key"},
	} {
		p := filepath.Join(dir, "bad.yaml")
		os.WriteFile(p, []byte(tc.cfg), 0o644)
		code, _, errOut := runCmd(t, "serve", "--config", p, "--http", "127.0.0.1:0")
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("config %q: exit %d %q, want %q", tc.cfg, code, errOut, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/checked")
	l := witnesstest.NewLog(t, k, "honest")
	data := t.TempDir()
	vkeyFile := filepath.Join(t.TempDir(), "log.vkey")
	os.WriteFile(vkeyFile, []byte(k.VKey+"\n"), 0o644)
	check := func(url string, extra ...string) (int, string, string) {
		return runCmd(t, append([]string{"check", "--log", url, "--vkey", vkeyFile, "--data", data}, extra...)...)
	}
	l.Grow(t, 5)
	if code, out, errOut := check(l.Server.URL); code != 0 || !strings.Contains(out, "size 5, recorded (first check)") {
		t.Fatalf("first check: %d %q %q", code, out, errOut)
	}
	l.Grow(t, 300)
	if code, out, _ := check(l.Prefix()); code != 0 || !strings.Contains(out, "grew from size 5 to 300 consistently") {
		t.Fatalf("second check: %d %q", code, out)
	}
	if code, out, _ := check(l.Prefix()); code != 0 || !strings.Contains(out, "unchanged at size 300") {
		t.Fatalf("third check: %d %q", code, out)
	}
	// The evil twin at a larger size: exit 1 and evidence.
	evil := witnesstest.NewLog(t, k, "evil")
	evil.Grow(t, 400)
	evFile := filepath.Join(t.TempDir(), "fork.json")
	code, _, errOut := check(evil.Prefix(), "--evidence", evFile)
	if code != 1 || !strings.Contains(errOut, "FORK") || !strings.Contains(errOut, evFile) {
		t.Fatalf("fork: %d %q", code, errOut)
	}
	b, err := os.ReadFile(evFile)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := witness.ParseEvidence(b)
	if err != nil || ev.Verify(k.Verifier) != nil {
		t.Fatalf("evidence: %v", err)
	}
	// The record did not move: the honest log is still fine.
	if code, out, _ := check(l.Prefix()); code != 0 || !strings.Contains(out, "unchanged at size 300") {
		t.Fatalf("after the fork: %d %q", code, out)
	}
	// Rollback: the twin is smaller and cannot serve the larger tree.
	small := witnesstest.NewLog(t, k, "small")
	small.Grow(t, 20)
	code, _, errOut = check(small.Prefix())
	if code != 1 || !strings.Contains(errOut, "ROLLBACK") {
		t.Fatalf("rollback: %d %q", code, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(data, "evidence", "*-rollback-*.json"))
	if len(files) != 1 {
		t.Fatalf("rollback evidence files: %v", files)
	}
	// Unreachable log: exit 1, nothing else.
	if code, _, errOut := check("http://127.0.0.1:1/"); code != 1 || !strings.Contains(errOut, "fetching the checkpoint") {
		t.Fatalf("unreachable: %d %q", code, errOut)
	}
}

// TestBinary runs the built command: check exits 1 on a fork, and serve
// shuts down cleanly on SIGTERM.
func TestBinary(t *testing.T) {
	bin := cmdtest.Build(t, "provlog-witness")
	k := witnesstest.NewKey(t, "log.example/bin")
	l := witnesstest.NewLog(t, k, "honest")
	evil := witnesstest.NewLog(t, k, "evil")
	l.Grow(t, 10)
	evil.Grow(t, 10)
	data := t.TempDir()
	if out, err := exec.Command(bin, "check", "--log", l.Prefix(), "--vkey", k.VKey, "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "check", "--log", evil.Prefix(), "--vkey", k.VKey, "--data", data)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "FORK") {
		t.Fatalf("check of the fork: %v\n%s", err, out)
	}

	cfgPath, _ := witnessSetup(t, k)
	srv, stderr := startWitness(t, bin, cfgPath, fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t)))
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil || !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, stderr.String())
	}
}
