package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSSEEventBounded: an event stream that goes on without ending a line,
// or an event, is refused once it holds maxEventBytes, naming the bound;
// the parser held all of it, without bound, for as long as it went on.
func TestSSEEventBounded(t *testing.T) {
	for name, piece := range map[string]string{
		"one endless line":               "x",
		"data lines without a blank one": "data: " + strings.Repeat("x", 1000) + "\n",
	} {
		var read atomic.Int64
		r := &countingReader{r: io.LimitReader(&repeatReader{s: piece}, 3*maxEventBytes), n: &read}
		var sp sseParser
		err := sp.read(r, func([]byte) bool { t.Fatalf("%s: an event was delivered", name); return true })
		if err != errEventTooBig {
			t.Errorf("%s: %v, want %v", name, err, errEventTooBig)
		}
		if n := read.Load(); n > 2*maxEventBytes { // the data and its lines' field names
			t.Errorf("%s: read %d bytes, on past the bound of %d", name, n, maxEventBytes)
		}
	}
}

// TestHTTPDownstreamEndlessAnswer: a server that answers a call with an
// event stream whose one event never ends, or with a JSON body without
// end, gets the call failed, saying why, once it sent more than
// maxEventBytes, and its answer is no longer read; the proxy held all of
// it until it ended.
func TestHTTPDownstreamEndlessAnswer(t *testing.T) {
	for _, tc := range []struct{ mediaType, head, want string }{
		{"text/event-stream", "id: e_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":", "the call's event stream: an event of the stream is over 16 MiB without its end"},
		{"application/json", "{\"jsonrpc\":\"2.0\",\"id\":", "the answer is over 16 MiB; it is given up"},
	} {
		t.Run(tc.mediaType, func(t *testing.T) {
			testHTTPDownstreamEndlessAnswer(t, tc.mediaType, tc.head, tc.want)
		})
	}
}

func testHTTPDownstreamEndlessAnswer(t *testing.T, mediaType, head, want string) {
	const total = 64 << 20
	var written atomic.Int64
	res, err := callOddDownstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", mediaType)
		w.Write([]byte(head))
		chunk := bytes.Repeat([]byte("1"), 1<<20)
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	got := ""
	if err != nil {
		got = err.Error()
	} else if res.IsError {
		got = textOf(res)
	}
	if !strings.Contains(got, want) {
		t.Errorf("a call answered without end: %v %q, want %q", err, got, want)
	}
	if n := written.Load(); n >= total {
		t.Errorf("the server wrote all %d bytes of its answer: the proxy read them all", n)
	}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// repeatReader is s over and over, without end.
type repeatReader struct {
	s   string
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

// TestHTTPDownstreamAnswersAnotherRequest: a server whose event stream of
// a call carries an answer to another request, and none to the call,
// gets the call failed naming both requests (the error said only that
// the stream ended without an answer).
func TestHTTPDownstreamAnswersAnotherRequest(t *testing.T) {
	_, err := callOddDownstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(`data: {"jsonrpc":"2.0","id":"provlog-999999","result":{"content":[]}}` + "\n\n"))
	})
	if err == nil || !strings.Contains(err.Error(), `the event stream ended without an answer`) ||
		!strings.Contains(err.Error(), `the stream carried an answer to request "provlog-999999", not to this call's "provlog-`) {
		t.Errorf("a call whose stream answered another request: %v", err)
	}
}

// callOddDownstream makes a call of tool x through the proxy to an HTTP
// MCP server that answers its tools/call POST with answer (everything
// else is go-sdk's), and returns the call's result and error.
func callOddDownstream(t *testing.T, answer http.HandlerFunc) (*mcp.CallToolResult, error) {
	t.Helper()
	return callOddDownstreamOn(t, newTestLog(t), answer)
}

// callOddDownstreamOn is callOddDownstream with a proxy on log l.
func callOddDownstreamOn(t *testing.T, l *testLog, answer http.HandlerFunc) (*mcp.CallToolResult, error) {
	t.Helper()
	p := startProxy(t, l, []ServerConfig{{ID: "m", URL: oddDownstream(t, answer)}}, nil)
	cs := connectMemory(t, p, nil)
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "m__x", Arguments: map[string]any{}})
}

// oddDownstream is the URL of an HTTP MCP server with the tool x that
// answers its tools/call POSTs with answer (everything else is go-sdk's).
func oddDownstream(t *testing.T, answer http.HandlerFunc) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			answer(w, r)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	return down.URL
}

// TestHTTPDownstreamUnreadableAnswer: a server whose event stream of a
// call carries its answer in an event the proxy cannot read (a result
// nested 100,000 deep, past encoding/json's bound; a batch) and then ends
// gets the call failed saying so. The event was skipped as if it were no
// message, and the call failed, and was recorded, as cut off by a server
// that "closed the connection during the call (it crashed or exited…)",
// whose session was then closed and reconnected: neither had happened.
func TestHTTPDownstreamUnreadableAnswer(t *testing.T) {
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	for _, tc := range []struct{ name, head, tail, want string }{
		{"deep", `{"jsonrpc":"2.0","id":`, `,"result":{"content":[],"structuredContent":{"d":` + deep + `}}}`, "exceeded max depth"},
		{"batch", `[{"jsonrpc":"2.0","id":`, `,"result":{"content":[]}}]`, "cannot unmarshal array"},
	} {
		_, err := callOddDownstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: " + tc.head + callRequestID(t, r) + tc.tail + "\n\n"))
		})
		if err == nil || strings.Contains(err.Error(), "closed the connection") ||
			!strings.Contains(err.Error(), "an event of the stream is not a JSON-RPC message the proxy can read") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: a call answered in an event the proxy cannot read: %v", tc.name, err)
		}
	}
}

// callRequestID returns the JSON-RPC id of the request r carries.
func callRequestID(t *testing.T, r *http.Request) string {
	var m struct{ ID json.RawMessage }
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.ID) == 0 {
		t.Errorf("a request without an id: %v", err)
	}
	return string(m.ID)
}
