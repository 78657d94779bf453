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

// TestServeStdioClientClosesStdout runs the real binary as a stdio MCP
// server in front of the side-effect downstream (runSidefx) and has the
// client close its end of provlog's stdout while a call is under way at
// the downstream, then make another call: writing that call's answer
// fails, and the sidecar goes on; the call under way ends and its outcome
// is recorded, and provlog exits cleanly once stdin closes. The failed
// write used to kill the process (SIGPIPE on fd 1), leaving the call
// under way, whose side effect was done, without an outcome.
func TestServeStdioClientClosesStdout(t *testing.T) {
	bin := cmdtest.Build(t, "provlog")
	exe, _ := os.Executable()
	dir := t.TempDir()
	data, fxFile, gate := filepath.Join(dir, "data"), filepath.Join(dir, "fx.txt"), filepath.Join(dir, "go")
	cb, _ := json.Marshal(map[string]any{"data": data, "actor": "local", "servers": []map[string]any{
		{"id": "fx", "command": []string{exe, "-test.run=^$"}, "env": map[string]string{sidefxEnv: fxFile}},
	}})
	cfgPath := filepath.Join(dir, "provlog.yaml")
	if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	send := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("writing to provlog's stdin: %v\n%s", err, stderr.String())
		}
	}
	// waitFor polls until cond holds; the minute is for a hung sidecar,
	// not a bound.
	waitFor := func(what string, cond func() bool) {
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("provlog ended (%v) waiting for %s\n%s", err, what, stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s\n%s", what, stderr.String())
			}
		}
	}
	appended := func(text string) func() bool {
		return func() bool {
			b, _ := os.ReadFile(fxFile)
			return strings.Contains(string(b), text+"\n")
		}
	}
	call := func(id, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx__append","arguments":` + args + `}}`
	}
	gq, _ := json.Marshal(gate)
	in := bufio.NewReader(out)
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if _, err := in.ReadString('\n'); err != nil {
		t.Fatalf("no answer to initialize: %v\n%s", err, stderr.String())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(call("2", `{"text":"under way","until_file":`+string(gq)+`}`))
	waitFor("side effect of the call under way", appended("under way"))
	out.Close() // the client stops reading: provlog's stdout is a broken pipe
	send(call("3", `{"text":"second"}`))
	waitFor("side effect of the second call", appended("second"))
	waitFor("log line of the failed write", func() bool {
		return strings.Contains(stderr.String(), "writing to the stdio client failed")
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := <-done; err != nil {
		t.Errorf("provlog serve: %v\n%s", err, stderr.String())
	}
	done <- nil
	audit, code := runCmd(t, "audit", "--data", data)
	if code != 0 || !strings.Contains(audit, "calls: 2 recorded\n") {
		t.Errorf("audit (want both calls recorded with their outcomes):\n%s", audit)
	}
}
