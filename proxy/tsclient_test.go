package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// The official TypeScript SDK client, driven by tools/mcptest/client.mjs,
// against the proxy over stdio (the testproxy program) and over HTTP.

type tsReport struct {
	ConnectError    *tsError `json:"connectError"`
	Server          map[string]any
	ProtocolVersion string `json:"protocolVersion"`
	Steps           []struct {
		Op       string
		OK       bool            `json:"ok"`
		Result   json.RawMessage `json:"result"`
		Error    *tsError        `json:"error"`
		Progress []map[string]any
	}
}

type tsError struct {
	Code    *int64          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func runTSClient(t *testing.T, plan map[string]any) *tsReport {
	t.Helper()
	script := need(t, "client.mjs", filepath.Join(mcptestDir(t), "client.mjs"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin(t), script, mustJSON(plan))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var r tsReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client.mjs printed %q: %v\n%s", out, err, stderr.String())
	}
	return &r
}

// tsSteps is what the TypeScript client does in both tests.
var tsSteps = []map[string]any{
	{"op": "listTools"},
	{"op": "callTool", "name": "ev__echo", "arguments": map[string]any{"message": "from typescript", "token": "ts-secret-value"}},
	{"op": "callTool", "name": "ev__trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 4}, "progress": true},
	{"op": "callTool", "name": "go__test_error_handling"},
	{"op": "callTool", "name": "nope__missing"},
	{"op": "callTool", "name": "go__test_tool_with_progress", "progress": true},
}

// checkTSReport checks the report of tsSteps; verify checks a receipt and
// returns its entry.
func checkTSReport(t *testing.T, r *tsReport, verify func(receipt string) *log.Entry) {
	t.Helper()
	if r.ConnectError != nil {
		t.Fatalf("connect: %s", r.ConnectError.Message)
	}
	if len(r.Steps) != len(tsSteps) {
		t.Fatalf("%d steps reported", len(r.Steps))
	}
	var tools struct {
		Tools []struct {
			Name        string
			InputSchema json.RawMessage `json:"inputSchema"`
		}
	}
	json.Unmarshal(r.Steps[0].Result, &tools)
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"ev__echo", "go__test_simple_text", toolStatus} {
		if !names[n] {
			t.Errorf("tools/list lacks %s", n)
		}
	}
	type result struct {
		Meta    map[string]any `json:"_meta"`
		IsError bool           `json:"isError"`
		Content []struct{ Text string }
	}
	step := func(i int) result {
		t.Helper()
		s := r.Steps[i]
		if !s.OK {
			t.Fatalf("step %d (%s): %s", i, s.Op, s.Error.Message)
		}
		var res result
		json.Unmarshal(s.Result, &res)
		return res
	}
	echo := step(1)
	if len(echo.Content) == 0 || !strings.Contains(echo.Content[0].Text, "from typescript") {
		t.Errorf("echo: %s", r.Steps[1].Result)
	}
	receipt, _ := echo.Meta[ReceiptKey].(string)
	e := verify(receipt)
	if args, _ := e.Fields["args"].(map[string]any); args["token"] != Redacted || args["message"] != "from typescript" {
		t.Errorf("recorded args %v", e.Fields["args"])
	}
	if c, _ := e.Fields["client"].(map[string]any); c["name"] != "mcptest" {
		t.Errorf("recorded client %v", e.Fields["client"])
	}
	long := step(2)
	verify(long.Meta[ReceiptKey].(string))
	if len(r.Steps[2].Progress) < 2 {
		t.Errorf("server-everything progress: %v", r.Steps[2].Progress)
	}
	if len(r.Steps[5].Progress) < 1 {
		t.Errorf("go server progress: %v", r.Steps[5].Progress)
	}
	toolErr := step(3)
	if !toolErr.IsError {
		t.Errorf("tool error: %s", r.Steps[3].Result)
	}
	if e := verify(toolErr.Meta[ReceiptKey].(string)); e.Fields["is_error"] != true {
		t.Errorf("tool error entry %v", e.Fields)
	}
	if s := r.Steps[4]; s.OK || s.Error.Code == nil || *s.Error.Code != -32602 {
		t.Errorf("unknown tool: %+v", s)
	}
}

func TestTypeScriptClientStdio(t *testing.T) {
	goServer := goEverything(t)
	ev := everythingJS(t, "stdio")
	mcptestDir(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "testproxy")
	build := exec.Command("go", "build", "-o", bin, "./internal/testproxy")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testproxy: %v\n%s", err, out)
	}
	vkeyFile, entriesFile := filepath.Join(dir, "vkey"), filepath.Join(dir, "entries")
	servers := []map[string]any{
		{"id": "go", "command": []string{goServer}},
		{"id": "ev", "command": ev, "redact": []string{"token"}},
	}
	r := runTSClient(t, map[string]any{
		"transport": "stdio",
		"command":   bin,
		"args":      []string{"-servers", mustJSON(servers), "-vkey", vkeyFile, "-entries", entriesFile},
		"steps":     tsSteps,
	})
	vkey, err := os.ReadFile(vkeyFile)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{} // leaf hash -> entry
	byIndex := map[uint64][]byte{}
	f, err := os.Open(entriesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, log.MaxEntrySize+1)
	for sc.Scan() {
		is, b, _ := bytes.Cut(bytes.Clone(sc.Bytes()), []byte(" "))
		i, err := strconv.ParseUint(string(is), 10, 64)
		if err != nil {
			t.Fatalf("entries file: %v", err)
		}
		entries[string(log.LeafHash(b))] = b
		byIndex[i] = b
	}
	checkTSReport(t, r, func(receipt string) *log.Entry {
		t.Helper()
		rc, err := log.ParseReceipt([]byte(receipt))
		if err != nil {
			t.Fatalf("receipt: %v\n%s", err, receipt)
		}
		b, ok := entries[string(rc.Extra)]
		if !ok {
			t.Fatalf("no recorded entry has the receipt's leaf hash")
		}
		if _, err := rc.Verify(log.LeafHash(b), verifier); err != nil {
			t.Fatalf("receipt does not verify: %v", err)
		}
		re, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		res, err := log.ParseCallResult(re)
		if err != nil {
			t.Fatal(err)
		}
		e, err := log.ParseEntry(byIndex[res.Call])
		if err != nil {
			t.Fatalf("call entry %d: %v", res.Call, err)
		}
		if e.Actor != "stdio-actor" || re.Actor != e.Actor {
			t.Errorf("actors %q, %q", e.Actor, re.Actor)
		}
		for k, v := range re.Fields {
			e.Fields[k] = v
		}
		return e
	})
}

func TestTypeScriptClientHTTP(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{
		{ID: "go", Command: []string{goEverything(t)}},
		{ID: "ev", Command: everythingJS(t, "stdio"), Redact: []string{"token"}},
	}, func(o *Options) { o.Actor = nil })
	url := serveHTTP(t, p)
	r := runTSClient(t, map[string]any{"transport": "http", "url": url, "token": testToken, "steps": tsSteps})
	if r.ProtocolVersion != "2025-11-25" {
		t.Errorf("negotiated %q", r.ProtocolVersion)
	}
	checkTSReport(t, r, func(receipt string) *log.Entry {
		t.Helper()
		e, _ := l.checkReceipt(t, receipt)
		if e.Actor != testActor {
			t.Errorf("actor %q", e.Actor)
		}
		return e
	})
	// The TypeScript client takes the fast path's JSON answers: its two
	// plain calls to downstream tools went that way (the two with progress
	// and the unknown tool went through the SDK).
	if n := p.fastCalls.Load(); n != 2 {
		t.Errorf("%d calls on the fast path, want 2", n)
	}

	before := l.size(t)
	bad := runTSClient(t, map[string]any{"transport": "http", "url": url, "token": "wrong", "steps": tsSteps[:2]})
	if bad.ConnectError == nil || bad.ConnectError.Code == nil || *bad.ConnectError.Code != 401 {
		t.Errorf("wrong token: %+v", bad.ConnectError)
	}
	if l.size(t) != before {
		t.Error("a call with a wrong token was recorded")
	}
}
