package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestInitializeSize: an initialize request over maxInitializeBytes is
// refused (413) and opens no session; a smaller one opens one. A session
// keeps its client's initialize params for its life: 60 sessions opened
// with 4 MiB of capabilities each held 480 MiB of the sidecar's memory,
// and sessions.max of them (1024) would have taken some 8 GiB, all under
// one token.
func TestInitializeSize(t *testing.T) {
	p := startProxy(t, newTestLog(t), []ServerConfig{fixtureServerConfig(t, "fx")}, nil)
	front := serveHTTP(t, p)
	sessions := func() int {
		n := 0
		for ss := range p.server.Sessions() {
			if ss.ID() != "" {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		pad  int
		want int
	}{
		{maxInitializeBytes, http.StatusRequestEntityTooLarge},
		{4<<20 - 1024, http.StatusRequestEntityTooLarge},
		{maxInitializeBytes - 1024, http.StatusOK},
	} {
		before := sessions()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"experimental":{"pad":%q}},"clientInfo":{"name":"big","version":"1"}}}`, strings.Repeat("x", tc.pad))
		resp, b := postMCP(t, front, body, map[string]string{"Authorization": "Bearer " + testToken})
		if resp.StatusCode != tc.want {
			t.Errorf("initialize of %d bytes: HTTP %d %.200q, want %d", len(body), resp.StatusCode, b, tc.want)
		}
		opened := sessions() - before
		if tc.want != http.StatusOK && (opened != 0 || resp.Header.Get("Mcp-Session-Id") != "") {
			t.Errorf("initialize of %d bytes opened %d sessions, want none", len(body), opened)
		}
		if tc.want == http.StatusOK && !strings.Contains(b, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("initialize of %d bytes: %.200q, want the server's answer", len(body), b)
		}
	}
}
