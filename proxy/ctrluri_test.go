package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadControlCharURI: a resources/read of a URI holding a control
// character (DEL, ESC, NUL) that no resource or template matches is
// answered with an error, and the client's session goes on. go-sdk's
// not-found error quotes the URI Go's way ("\x7f") in its data, which is
// no JSON: the answer could not be written, and go-sdk ended the
// session (the stdio client got EOF, the HTTP one "request terminated
// without response"), for each of 3 such URIs.
func TestReadControlCharURI(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "1"}, nil)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "f", URITemplate: "file:///{+path}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "h", URL: down.URL}}, nil)
	ctx := context.Background()
	url := serveHTTP(t, p)
	for _, uri := range []string{"h+file:///a\x7f", "h+file:///a\x1b[2J", "h+file:///a\x00"} {
		for front, cs := range map[string]*mcp.ClientSession{"stdio": connectMemory(t, p, nil), "HTTP": connectHTTP(t, url, "2025-11-25", nil)} {
			size := l.size(t)
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
				t.Errorf("%s: a read of %q succeeded", front, uri)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Errorf("%s: the session after a read of %q: %v", front, uri, err)
			}
			if n := l.size(t) - size; n != 0 {
				t.Errorf("%s: a read of %q wrote %d entries", front, uri, n)
			}
		}
	}
}
