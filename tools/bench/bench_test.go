package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuick builds cmd/logbench and runs its -quick mode end to end: every
// phase in its own child process, both logs, the result table and the root
// cross-check. It checks that the run completes and reports what it should,
// not how fast anything was (the machine is shared and noisy).
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about a minute; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "logbench")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/logbench")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/logbench: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"-quick", "-dir", filepath.Join(tmp, "data")}
	// The PostgreSQL columns run on the cluster tools/pgtest/start.sh
	// started; CI always has one.
	pg := os.Getenv("PROVLOG_TEST_POSTGRES")
	if pg == "" && os.Getenv("CI") == "true" {
		t.Fatal(`PROVLOG_TEST_POSTGRES is not set: eval "$(bash tools/pgtest/start.sh)"`)
	}
	if pg != "" {
		args = append(args, "-postgres", pg)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("logbench -quick: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("logbench -quick took %v\n%s", time.Since(start).Round(time.Second), stdout.String())

	out := stdout.String()
	if pg != "" && !strings.Contains(out, "provlog on PostgreSQL, 2 sidecars") {
		t.Errorf("output lacks the PostgreSQL columns")
	}
	for _, want := range []string{
		"| metric | provlog | Tessera A",
		"1. durable append throughput, 1 appender",
		"1. durable append throughput, 256 appenders",
		"2. latency append → signed checkpoint + inclusion proof, 64 appenders",
		"3. verified inclusion proofs/s",
		"4a. bytes on disk per entry",
		"4b. peak RSS",
		"roots verified",
		"GOMAXPROCS",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The children clean up after themselves: nothing is left under -dir.
	left, err := os.ReadDir(filepath.Join(tmp, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("logbench left %d entries under -dir", len(left))
	}
}
