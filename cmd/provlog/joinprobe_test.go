package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func probeNext(s stdioSidecar, d time.Duration) string {
	ch := make(chan string, 1)
	go func() { ch <- s.next() }()
	select {
	case b := <-ch:
		return b
	case <-time.After(d):
		return "(nothing)"
	}
}

func TestProbeJoinCancelReuse(t *testing.T) {
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askServer() }, nil))
	defer down.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeFile(t, filepath.Join(dir, "provlog.yaml"), fmt.Appendf(nil, "data: %s\nservers:\n  - {id: ap, url: %q, protocol: 2025-11-25, timeout: 10m}\n", data, down.URL))
	_, stop := startServe(t, "--config", cfg)
	defer stop()
	s := startStdioProc(t, data)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ap__ask","arguments":{"a":1}}}`)
	t.Logf("1: %.300s", s.next())
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ap__ask","arguments":{"a":2}}}`)
	for i := range 4 {
		b := probeNext(s, 5*time.Second)
		t.Logf("after cancel %d: %.400s", i, b)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal([]byte(b), &m)
		if m.Method == "elicitation/create" {
			// garbage then mismatched then right
			s.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":"garbage"}`)
			s.send(`{"jsonrpc":"2.0","id":987654,"result":{"action":"accept","content":{"token":"x"}}}`)
		}
	}
	s.end()
	t.Logf("stderr: %s", s.stderr.String())
}

func TestProbeJoinKill(t *testing.T) {
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return askServer() }, nil))
	defer down.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeFile(t, filepath.Join(dir, "provlog.yaml"), fmt.Appendf(nil, "data: %s\nservers:\n  - {id: ap, url: %q, protocol: 2025-11-25, timeout: 10m}\n", data, down.URL))
	sp, err := startFxSidecar(t, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := startStdioProc(t, data)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.next()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ap__ask","arguments":{"a":1}}}`)
	t.Logf("1: %.300s", s.next())
	sp.cmd.Process.Kill()
	<-sp.done
	t.Logf("after kill: %.400s", probeNext(s, 10*time.Second))
	s.send(createTask("3", "after kill"))
	t.Logf("call after kill: %.400s", probeNext(s, 10*time.Second))
	sp2, err := startFxSidecar(t, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.send(createTask("4", "after restart"))
	t.Logf("call after restart: %.400s", probeNext(s, 10*time.Second))
	s.end()
	t.Logf("stderr: %s", s.stderr.String())
	sp2.cmd.Process.Kill()
	<-sp2.done
	out, code := runCmd(t, "audit", "--data", data)
	t.Logf("audit %d: %.1000s", code, out)
	for i, e := range readAll(t, data) {
		if e["kind"] == "call" || e["kind"] == "call.result" || e["kind"] == "task.created" {
			b, _ := json.Marshal(e)
			t.Logf("entry %d: %.300s", i, b)
		}
	}
}
