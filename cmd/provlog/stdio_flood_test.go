package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestServeStdioFloodUnread runs the real binary as a stdio MCP server
// and sends it pings, answers to which come to 6 MiB, without reading
// its stdout: it stops reading the pings once it holds a few MiB of
// answers, says so on stderr, and reads on once the client reads; every
// ping is answered. It used to read every request and queue every
// answer, growing without bound (15,000 unread tools/list answers held
// 420 MB).
func TestServeStdioFloodUnread(t *testing.T) {
	floodUnread(t, filepath.Join(t.TempDir(), "data"), "reading its requests paused")
}

// TestJoinedStdioFloodUnread is TestServeStdioFloodUnread of a stdio
// serve that joined a running HTTP sidecar. It used to relay each request
// on a goroutine of its own, holding every answer the client did not read
// (31,000 unread pings held 1.5 GB).
func TestJoinedStdioFloodUnread(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	defer stop()
	floodUnread(t, data, "reading its requests paused")
}

// floodUnread sends a stdio serve on data pings without reading its
// stdout until it says on stderr that it paused (said), then reads every
// answer.
func floodUnread(t *testing.T, data, said string) {
	bin := cmdtest.Build(t, "provlog")
	cmd := exec.Command(bin, "serve", "--data", data)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &proctest.Buffer{}
	// The sidecar's pause shows on stderr; until then stdout is not read.
	paused := make(chan struct{})
	go func() {
		lines, seen := bufio.NewScanner(errPipe), false
		for lines.Scan() {
			stderr.Write(append(lines.Bytes(), '\n'))
			if !seen && strings.Contains(lines.Text(), said) {
				close(paused)
				seen = true
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(stdout)
	stdin.Write([]byte(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}` + "\n"))
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatalf("no answer to initialize: %v\n%s", err, stderr.String())
	}
	const pings = 100000
	pad := strings.Repeat("p", 24)
	written := make(chan error, 1)
	go func() {
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
		for i := range pings {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"%s%d","method":"ping"}`+"\n", pad, i)
			if b.Len() > 64<<10 || i == pings-1 {
				if _, err := stdin.Write(b.Bytes()); err != nil {
					written <- err
					return
				}
				b.Reset()
			}
		}
		written <- nil
	}()
	select {
	case err := <-written:
		t.Fatalf("provlog read all %d pings (%d MiB of answers) while its client read none of its answers (write: %v)\n%.2000s", pings, pings*len(`{"jsonrpc":"2.0","id":"","result":{}}`+pad+"123456\n")>>20, err, stderr.String())
	case <-paused:
	}
	for i := range pings {
		b, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d answers: %v\n%s", i, err, stderr.String())
		}
		if !strings.Contains(b, `"result":{}`) {
			t.Fatalf("answer %d: %.200s", i, b)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("provlog serve: %v\n%s", err, stderr.String())
	}
}
