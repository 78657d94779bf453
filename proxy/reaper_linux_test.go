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
			if err := startProcess(cmd); err != nil {
				t.Fatal(err)
			}
			defer killProcessGroup(cmd)
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
