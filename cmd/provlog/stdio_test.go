package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeStdioBadLine runs the real binary as a stdio MCP server and
// sends it, between two calls, a line that is not JSON: the line is
// answered -32700 (Parse error) with id null, both calls are answered
// and recorded, and stderr says what was wrong. The session used to end
// at the line, and the second call went unanswered.
func TestServeStdioBadLine(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	sc := startStdioSidecar(t, data)
	send, next, stderr := sc.send, sc.next, sc.stderr
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
	sc.end()
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
