package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// postMCP POSTs one JSON-RPC body to the MCP front at url the way a client
// does (a JSON body; JSON or an event stream accepted), with header's
// members set as they are (an empty value too), and returns the answer with its body read and
// closed.
func postMCP(t *testing.T, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body) // a cut answer is for the caller to judge
	resp.Body.Close()
	return resp, string(b)
}
