package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestViewOriginEscapes: `provlog view DIR` prints, first thing, the
// address to open and the checkpoint's origin, read from the directory
// with log.ParseCheckpointNote, which takes any bytes but newline in the
// origin line; view checks nothing, by design. A bundle whose origin ends
// in an OSC 8 hyperlink opener (ESC ] 8 ; ; https://evil.example/ui/ ESC \)
// would turn the address printed after it into a link to the author's
// site in terminals that follow OSC 8, a page that can say "Verified" to
// anything: the origin prints through log.Printable, escaped.
func TestViewOriginEscapes(t *testing.T) {
	data := makeDataDir(t, 3)
	out := filepath.Join(t.TempDir(), "bundle")
	if o, code := runCmd(t, "export", "--data", data, "--out", out); code != 0 {
		t.Fatalf("export: %s", o)
	}
	cpPath := filepath.Join(out, "checkpoint")
	cp, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	origin, rest, _ := strings.Cut(string(cp), "\n")
	hostile := origin + "\x1b]8;;https://evil.example/ui/\x1b\\"
	if err := os.WriteFile(cpPath, []byte(hostile+"\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout proctest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"view", "--http", addr, out}, &stdout, &stdout) }()
	defer func() {
		cancel()
		<-done
	}()
	proctest.WaitFor(t, "provlog view to print its address", func() bool {
		select {
		case code := <-done:
			done <- code // for the deferred wait
			t.Fatalf("view exited with %d: %s", code, stdout.String())
		default:
		}
		return strings.Contains(stdout.String(), "/ui/\n")
	})
	if s := stdout.String(); strings.IndexByte(s, 0x1b) >= 0 {
		t.Errorf("provlog view prints a terminal escape from the directory's checkpoint raw: %q", s)
	}
}
