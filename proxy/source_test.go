package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/source"
)

// TestCallRelease: a server's source puts "release" in its call entries;
// a source that hangs delays the call by its timeout but never fails it.
func TestCallRelease(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	l := newTestLog(t)
	good := fixtureServerConfig(t, "good")
	good.Source = &source.Config{Type: source.TypeStatic, Value: "2025_01"}
	bad := fixtureServerConfig(t, "bad")
	bad.Source = &source.Config{Type: source.TypeHTTPJSON, URL: hang.URL, Path: "v", Timeout: 100 * time.Millisecond}
	p := startProxy(t, l, []ServerConfig{good, bad}, nil)
	cs := connectMemory(t, p, newClientLog())
	for _, c := range []struct{ tool, want string }{{"good__ok", "2025_01"}, {"bad__ok", ""}} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.tool, err, res)
		}
		e, _ := l.checkReceipt(t, metaReceipt(res.Meta))
		got, _ := e.Fields["release"].(string)
		if e.Kind != log.KindCall || got != c.want {
			t.Errorf("%s: release %q, want %q", c.tool, got, c.want)
		}
	}
}
