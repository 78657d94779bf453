package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestJoinedRejoinsRestartedSidecar restarts the HTTP sidecar a stdio
// serve joined, first on its address (the session it knew is gone: 404),
// then on another (nothing answers at the old one): each time the joined
// client's next call is answered and recorded by the new sidecar, and so
// is the one after it, on the new session; the bridge found the sidecar
// again and made a new session with the client's own initialize. Every
// request after a restart was answered "restart this MCP server" for good
// (Claude Desktop lost provlog at each restart of the sidecar).
func TestJoinedRejoinsRestartedSidecar(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	_, stop := startServeAt(t, addr, "--data", data)
	s := startStdioSidecar(t, data)
	s.send(createTask("2", "first"))
	answered(t, s.next(), "2")
	stop()

	_, stop = startServeAt(t, addr, "--data", data)
	s.send(createTask("3", "same address"))
	answered(t, s.next(), "3")
	s.send(createTask("4", "same address again"))
	answered(t, s.next(), "4")
	stop()

	_, stop = startServe(t, "--data", data)
	s.send(createTask("5", "new address"))
	answered(t, s.next(), "5")
	s.send(createTask("6", "new address again"))
	answered(t, s.next(), "6")
	if n := strings.Count(s.stderr.String(), "joined it again"); n != 2 {
		t.Errorf("the bridge said %d times that it joined the sidecar again, want 2:\n%s", n, s.stderr.String())
	}
	s.end()
	stop()
	var titles []string
	for _, e := range readAll(t, data) {
		if e["kind"] == "task.create" {
			title, _ := e["title"].(string)
			titles = append(titles, title)
		}
	}
	if w := "first|same address|same address again|new address|new address again"; strings.Join(titles, "|") != w {
		t.Errorf("the log's tasks are %q, want %s", titles, w)
	}
}
