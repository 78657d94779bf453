// Package cmdtest builds a command for its tests that run it as a real
// process (stdio MCP sessions, kill -9, a full disk), so that they run the
// binary a user runs, not the test binary.
package cmdtest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the command in the test's working directory (go test runs a
// package's tests in its own directory) as name in a temporary directory,
// and returns the binary's path. -short skips the test: a build takes
// seconds.
func Build(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}
