//go:build linux

package proxy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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
