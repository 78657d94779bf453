package proxy

import (
	"bytes"
	"encoding/json"
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
	resp := requestMCP(t, http.MethodPost, url, body, header)
	b, _ := io.ReadAll(resp.Body) // a cut answer is for the caller to judge
	resp.Body.Close()
	return resp, string(b)
}

// requestMCP sends a request of method with body to the MCP front at url
// as postMCP does, and returns the answer unread.
func requestMCP(t *testing.T, method, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
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
	return resp
}

// idMethod is the id and method of a JSON-RPC message.
type idMethod struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// readIDMethod reads r's body, one JSON-RPC message, for its id and
// method (zero if it is none), and leaves it to be read again.
func readIDMethod(r *http.Request) idMethod {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m idMethod
	json.Unmarshal(body, &m)
	return m
}
