package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/cmd/internal/cmdtest"
	"github.com/provlog/provlog/log/logtest/proctest"
)

// TestServeStdioBadLine runs the real binary as a stdio MCP server and
// sends it, between two calls, a line that is not JSON: the line is
// answered -32700 (Parse error) with id null, both calls are answered
// and recorded, and stderr says what was wrong. The session used to end
// at the line, and the second call went unanswered.
func TestServeStdioBadLine(t *testing.T) {
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
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"create_task","arguments":{"title":"task ` + id + `"}}}`
	}
	send(call("2"))
	send("hello, this is not JSON")
	send(call("3"))
	receipts := map[string]string{}
	var refusal string
	for len(receipts) < 2 || refusal == "" {
		b := next()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Meta map[string]string `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("provlog wrote %q: %v", b, err)
		}
		switch id := string(m.ID); id {
		case "2", "3":
			receipts[id] = m.Result.Meta["dev.provlog/receipt"]
			if receipts[id] == "" {
				t.Fatalf("call %s: %s", id, b)
			}
		case "null":
			refusal = b
		default:
			t.Fatalf("provlog wrote %q", b)
		}
	}
	if !strings.Contains(refusal, `"code":-32700`) || !strings.Contains(refusal, `the line is not JSON (invalid character 'h' looking for beginning of value, at byte 1): \"hello, this is not JSON\"`) {
		t.Errorf("the line that is not JSON was answered %s", refusal)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("provlog serve: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the stdio client sent a line that is not a JSON-RPC message") {
		t.Errorf("stderr does not name the line:\n%s", stderr.String())
	}
	for id, rc := range receipts {
		f := filepath.Join(t.TempDir(), "r"+id)
		os.WriteFile(f, []byte(rc), 0o600)
		if out, code := runCmd(t, "verify-proof", "--vkey", filepath.Join(data, logVKeyFile), f); code != 0 {
			t.Errorf("verify-proof of call %s: %s", id, out)
		}
	}
	if out, code := runCmd(t, "audit", "--data", data); code != 0 {
		t.Errorf("audit: %s", out)
	}
}
