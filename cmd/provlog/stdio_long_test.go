package main

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestServeStdioLongLine runs the real binary as a stdio MCP server and
// sends it, between two calls, a call on one line longer than the SDK's
// limit for a message (17 MiB): the line is answered -32600 with id null,
// saying it is too long, and the session goes on, so the second call is
// answered and recorded. The sidecar used to exit at the line, without
// a word to the client.
func TestServeStdioLongLine(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(bin, "serve", "--data", data)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		in := bufio.NewReader(stdout)
		for {
			b, err := in.ReadString('\n')
			if err != nil {
				return
			}
			lines <- b
		}
	}()
	send := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("writing to provlog's stdin: %v\n%s", err, stderr.String())
		}
	}
	next := func() string {
		select {
		case b, ok := <-lines:
			if !ok {
				t.Fatalf("provlog closed its stdout\n%s", stderr.String())
			}
			return b
		case <-time.After(time.Minute): // for a hung sidecar, not a bound
			t.Fatalf("no answer from provlog\n%s", stderr.String())
		}
		return ""
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := func(id, title string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"` + title + `"}}}`
	}
	send(call("2", strings.Repeat("x", 17<<20)))
	if b := next(); !strings.Contains(b, `"id":null`) || !strings.Contains(b, `"code":-32600`) || !strings.Contains(b, "longer than") {
		t.Errorf("the long line was answered %.300s", b)
	}
	send(call("3", "short"))
	if b := next(); !strings.HasPrefix(b, `{"jsonrpc":"2.0","id":3,"result":`) || !strings.Contains(b, "dev.provlog/receipt") {
		t.Errorf("the call after the long line was answered %.300s", b)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("provlog serve: %v\n%s", err, stderr.String())
	}
	if out, code := runCmd(t, "audit", "--data", data); code != 0 {
		t.Errorf("audit: %s", out)
	}
}
