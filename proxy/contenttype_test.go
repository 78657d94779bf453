package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestFastPathContentType: a tools/call whose Content-Type is not JSON
// (application/jsonx, application/json-seq) is refused 415 on the fast
// path as the SDK's handler refuses it, and is neither recorded nor
// forwarded; JSON with parameters or in other case is served. The fast
// path took any Content-Type that began with "application/json", and made
// and recorded the call.
func TestFastPathContentType(t *testing.T) {
	r := newReapRig(t, false)
	cs := r.session(t)
	for i, tc := range []struct {
		contentType string
		want        int
	}{
		{"application/jsonx", http.StatusUnsupportedMediaType},
		{"application/json-seq", http.StatusUnsupportedMediaType},
		{"application/json;;", http.StatusUnsupportedMediaType},
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
	} {
		text := fmt.Sprintf("content type %d", i)
		before, appended := r.l.size(t), r.appended(t)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx__append","arguments":{"text":%q}}}`, i+1, text)
		resp, b := postMCP(t, r.front, body, map[string]string{
			"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25",
			"Content-Type": tc.contentType,
		})
		if resp.StatusCode != tc.want {
			t.Errorf("Content-Type %q: HTTP %d %.200q, want %d", tc.contentType, resp.StatusCode, b, tc.want)
		}
		if tc.want == http.StatusOK {
			continue
		}
		if got := r.l.size(t); got != before {
			t.Errorf("Content-Type %q: the log grew by %d entries", tc.contentType, got-before)
		}
		if got := r.appended(t); got != appended {
			t.Errorf("Content-Type %q: the call was forwarded: the fixture appended %q", tc.contentType, strings.TrimPrefix(got, appended))
		}
	}
}
