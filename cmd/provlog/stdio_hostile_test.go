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

// stdioSidecar is the real binary serving MCP over stdio on data (a new
// data dir unless given), initialized at revision 2025-11-25: send writes
// a line to it, next reads one from it, closeStdin closes its stdin, and
// end closes its stdin, waits for it to exit cleanly and, unless data was
// given, audits its log.
type stdioSidecar struct {
	send       func(string)
	next       func() string
	closeStdin func()
	end        func()
	stderr     *proctest.Buffer
}

func startStdioSidecar(t *testing.T, data string) stdioSidecar {
	s := startStdioProc(t, data)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

// startStdioProc is startStdioSidecar without initialize: what the
// client sends first is the test's.
func startStdioProc(t *testing.T, data string) stdioSidecar {
	bin := cmdtest.Build(t, "provlog")
	audit := data == ""
	if audit {
		data = filepath.Join(t.TempDir(), "data")
	}
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
	s := stdioSidecar{stderr: stderr}
	s.send = func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("writing to provlog's stdin: %v\n%s", err, stderr.String())
		}
	}
	s.next = func() string {
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
	s.closeStdin = func() { stdin.Close() }
	s.end = func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("provlog serve: %v\n%s", err, stderr.String())
		}
		if !audit {
			return
		}
		if out, code := runCmd(t, "audit", "--data", data); code != 0 {
			t.Errorf("audit: %s", out)
		}
	}
	return s
}

// createTask is a tools/call of create_task under id.
func createTask(id, title string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"` + title + `"}}}`
}

// answered fails t unless b is a recorded call's answer under id.
func answered(t *testing.T, b, id string) {
	t.Helper()
	if !strings.HasPrefix(b, `{"jsonrpc":"2.0","id":`+id+`,"result":`) || !strings.Contains(b, "dev.provlog/receipt") {
		t.Errorf("call %s was answered %.300s", id, b)
	}
}

// TestServeStdioLongLine runs the real binary as a stdio MCP server and
// sends it, between two calls, a call on one line longer than the SDK's
// limit for a message (17 MiB): the line is answered -32600 with id null,
// saying it is too long, and the session goes on, so the second call is
// answered and recorded. The sidecar used to exit at the line, without
// a word to the client.
func TestServeStdioLongLine(t *testing.T) {
	s := startStdioSidecar(t, "")
	s.send(createTask("2", strings.Repeat("x", 17<<20)))
	if b := s.next(); !strings.Contains(b, `"id":null`) || !strings.Contains(b, `"code":-32600`) || !strings.Contains(b, "longer than") {
		t.Errorf("the long line was answered %.300s", b)
	}
	s.send(createTask("3", "short"))
	answered(t, s.next(), "3")
	s.end()
}

// TestServeStdioBatch runs the real binary as a stdio MCP server on a
// session of revision 2025-11-25, which has no JSON-RPC batches, and
// sends it a batch between two calls: the batch is answered -32600 with
// id null, saying so, none of its calls is made, and the session goes on.
// The sidecar used to exit at the batch, without a word to the client.
func TestServeStdioBatch(t *testing.T) {
	s := startStdioSidecar(t, "")
	s.send(createTask("2", "before"))
	answered(t, s.next(), "2")
	s.send("[" + createTask("3", "in a batch") + `,{"jsonrpc":"2.0","id":4,"method":"ping"}]`)
	if b := s.next(); !strings.Contains(b, `"id":null`) || !strings.Contains(b, `"code":-32600`) || !strings.Contains(b, "batch") {
		t.Errorf("the batch was answered %.300s", b)
	}
	s.send(createTask("5", "after"))
	answered(t, s.next(), "5")
	s.end()
}

// TestServeStdioBatchBeforeInitAnswer runs the real binary as a stdio
// MCP server and sends it, in one write, initialize for revision
// 2025-11-25 and a batch, before the initialize answer came back: the
// batch is answered -32600 with id null (before or after initialize's
// answer), as it is once the answer went out (TestServeStdioBatch), and
// the session goes on. The front judged
// the batch before it knew the session's revision and passed it to the
// SDK, which ended the session (and the sidecar) if it had already taken
// the revision from initialize.
func TestServeStdioBatchBeforeInitAnswer(t *testing.T) {
	for round := range 5 {
		s := startStdioProc(t, "")
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n" +
			"[" + createTask("2", "in a batch") + `,{"jsonrpc":"2.0","id":3,"method":"ping"}]`)
		// Two answers, in either order: JSON-RPC promises none, and the
		// front answers the batch itself while the SDK answers initialize.
		var init, batch int
		for range 2 {
			switch b := s.next(); {
			case strings.HasPrefix(b, `{"jsonrpc":"2.0","id":1,"result":`):
				init++
			case strings.Contains(b, `"id":null`) && strings.Contains(b, `"code":-32600`) && strings.Contains(b, "batch"):
				batch++
			default:
				t.Fatalf("round %d: answered %.300s, want initialize's result and the batch's -32600", round, b)
			}
		}
		if init != 1 || batch != 1 {
			t.Fatalf("round %d: %d answers to initialize and %d to the batch, want 1 each", round, init, batch)
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.send(createTask("4", "after"))
		answered(t, s.next(), "4")
		s.end()
	}
}

// TestJoinedStdioBadLines runs a stdio serve that joins a running HTTP
// sidecar and sends it lines that are no JSON-RPC message it can relay
// (not JSON, an object with more after it, a batch on a 2025-11-25
// session), then a call: each line is answered with id null, as the stdio
// front answers it, and the call is answered and recorded. The joined
// bridge used to answer none of them (the sidecar's 400 went to stderr),
// so a client waited for an answer without end.
func TestJoinedStdioBadLines(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	defer stop()
	s := startStdioSidecar(t, data)
	for _, line := range []string{
		"hello, this is not JSON",
		`{"jsonrpc":"2.0","id":2,"method":"ping"} and more`,
		"[" + createTask("3", "in a batch") + "]",
	} {
		s.send(line)
		if b := s.next(); !strings.HasPrefix(b, `{"jsonrpc":"2.0","id":null,"error":{"code":-32`) {
			t.Errorf("%.40s was answered %.300s", line, b)
		}
	}
	s.send(createTask("4", "after"))
	answered(t, s.next(), "4")
	s.end()
}

// TestJoinedStdioLongLine runs a stdio serve that joins a running HTTP
// sidecar and sends it a call on a line longer than a message may be
// (17 MiB), then a call: the line is dropped unread, answered as the
// stdio front answers it, and the next call is answered. The joined
// bridge used to hold a line of any length (a 200 MB line took it to
// 1.08 GB) and post it to the sidecar, which refused it.
func TestJoinedStdioLongLine(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, stop := startServe(t, "--data", data)
	defer stop()
	s := startStdioSidecar(t, data)
	s.send(createTask("2", strings.Repeat("x", 17<<20)))
	if b := s.next(); !strings.Contains(b, `"id":null`) || !strings.Contains(b, `"code":-32600`) || !strings.Contains(b, "longer than") {
		t.Errorf("the long line was answered %.300s", b)
	}
	s.send(createTask("3", "short"))
	answered(t, s.next(), "3")
	s.end()
}
