//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStdioStartErrorThroughReaper: a stdio server that cannot be
// started (a file that is not executable) fails to connect with the error
// exec gave, as when the sidecar started it itself, though the reaper
// (reaper_linux.go) is what the sidecar starts.
func TestStdioStartErrorThroughReaper(t *testing.T) {
	script := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig{ID: "noexec", Command: []string{script}}
	_, err := Dial(context.Background(), cfg, "2025-11-25", "test", "1", nil)
	t.Logf("Dial: %v", err)
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), script) {
		t.Fatalf("Dial: %v, want exec's permission denied for %s", err, script)
	}
}

// TestStdioWithoutReaperMain: a test package that forgets to call
// ReaperMain in a TestMain (testdata/noreapermain has none) fails at
// once, saying what to call: no stdio server is started, so the test
// binary is not re-executed as a reaper that would run its tests instead
// (and start one more of itself from each).
func TestStdioWithoutReaperMain(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "./testdata/noreapermain")
	out, err := cmd.CombinedOutput()
	t.Logf("go test ./testdata/noreapermain: %v\n%s", err, out)
	if err == nil {
		t.Fatal("a test package without ReaperMain passed its stdio test, want it failed")
	}
	for _, want := range []string{"Dial: starting a stdio server: this program does not call proxy.ReaperMain", "--- FAIL: TestDialStdio"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("go test's output lacks %q", want)
		}
	}
	if strings.Contains(string(out), "re-executed as a stdio server's reaper") {
		t.Error("the test binary was re-executed as the reaper")
	}
}

// TestStdioExitThroughReaper: a stdio server started through the reaper
// ends for the sidecar as it ended (its exit code, or the signal that
// killed it, SIGTERM forwarded to it), and what it wrote on stderr
// reaches the sidecar.
func TestStdioExitThroughReaper(t *testing.T) {
	for _, c := range []struct {
		name, script string
		term         bool // the sidecar sends SIGTERM to the process it started
		want         string
	}{
		{"code", `echo said-on-stderr >&2; exit 3`, false, "exit status 3"},
		{"signal", `echo said-on-stderr >&2; kill -KILL $$`, false, "signal: killed"},
		{"sigterm", `echo said-on-stderr >&2; kill -TERM $$`, false, "signal: terminated"},
		{"sigsegv", `ulimit -c 0; echo said-on-stderr >&2; kill -SEGV $$`, false, "signal: segmentation fault"},
		{"forwarded", `trap 'echo said-on-stderr >&2; exit 7' TERM; echo up; while :; do sleep 0.01; done`, true, "exit status 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", c.script)
			setProcessGroup(cmd)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			proc := &process{Cmd: cmd}
			if err := startProcess(proc); err != nil {
				t.Fatal(err)
			}
			defer killProcessGroup(proc)
			if c.term {
				if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
					t.Fatal(err)
				}
				cmd.Process.Signal(syscall.SIGTERM)
			}
			io.Copy(io.Discard, stdout)
			err = cmd.Wait()
			if err == nil || err.Error() != c.want {
				t.Errorf("the server ended: %v, want %s", err, c.want)
			}
			if got := stderr.String(); got != "said-on-stderr\n" {
				t.Errorf("stderr %q, want %q", got, "said-on-stderr\n")
			}
		})
	}
}
