// Package noreapermain is a test package that forgets proxy.ReaperMain:
// it has no TestMain. TestStdioWithoutReaperMain (proxy) runs its test,
// which must fail at once, saying so.
package noreapermain

import (
	"context"
	"os"
	"testing"

	"github.com/provlog/provlog/proxy"
)

func TestDialStdio(t *testing.T) {
	if os.Getenv("PROVLOG_STDIO_REAPER") != "" {
		// This binary was re-executed as the reaper after all: stop here,
		// or its test would start the next one.
		t.Fatal("re-executed as a stdio server's reaper")
	}
	c, err := proxy.Dial(context.Background(), proxy.ServerConfig{ID: "cat", Command: []string{"cat"}}, "2025-11-25", "test", "1", nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
}
