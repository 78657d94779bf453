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
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPDeepAnswerUncaptured: an HTTP server's answer nested deeper
// than go-sdk reads, to a request the proxy sends through go-sdk without
// capturing its result (completion/complete), fails that request alone:
// go-sdk reads an error answer in its place (deepStandIn), its connection
// to the server goes on, and a call after it is made on the same session.
// go-sdk ended the connection on such an answer (the tees sat only under
// captured requests): the proxy restarted the server's connection, and
// the call after it failed ("the server no longer knows the session").
func TestHTTPDeepAnswerUncaptured(t *testing.T) {
	var deep atomic.Int32
	pc, inits := deepCompletionProxy(t, func(w io.Writer, id json.RawMessage) {
		deep.Add(1)
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(id)+`,"result":{"completion":{"values":[]},"d":`+nested(1001)+"}}\n\n")
	}, nil)
	pc.send(deepCompletion)
	got := pc.read()
	if deep.Load() != 1 || !bytes.Contains(got, []byte(`"error"`)) || !strings.Contains(string(got), deepStandIn) {
		t.Errorf("the completion answered %d times nested too deep: the client got %.300s, want an error saying so", deep.Load(), got)
	}
	pc.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"h__x","arguments":{}}}`)
	if got := pc.read(); !bytes.Contains(got, []byte(`"made"`)) {
		t.Errorf("the call after it: %.300s", got)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the proxy connected to the server %d times, want once: the deep answer ended its connection", n)
	}
}

// TestHTTPDeepNotification: a notification of an HTTP server's nested
// deeper than go-sdk reads, on the stream of a request go-sdk sends for
// the proxy (completion/complete), does not end the connection: go-sdk
// reads it as one whose params it cannot read (shallowed), and the
// request's answer reaches the client on the same session. It ended
// go-sdk's connection, failing the request.
func TestHTTPDeepNotification(t *testing.T) {
	pc, inits := deepCompletionProxy(t, func(w io.Writer, id json.RawMessage) {
		io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":`+nested(1001)+"}}\n\n")
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(id)+`,"result":{"completion":{"values":["made"]}}}`+"\n\n")
	}, nil)
	pc.send(deepCompletion)
	if got := pc.read(); !bytes.Contains(got, []byte(`"made"`)) {
		t.Errorf("a completion whose stream holds a notification nested too deep: %.300s", got)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the proxy connected to the server %d times, want once: the deep notification ended its connection", n)
	}
}

// TestHTTPDeepServerRequest: a request of an HTTP server's nested deeper
// than go-sdk reads, on the stream of a request go-sdk sends for the
// proxy (completion/complete), is answered to the server with go-sdk's
// error for params it cannot read, and the stream goes on: the server,
// holding its answer back until it has that error, answers the
// completion, which reaches the client. It ended go-sdk's connection,
// failing the completion, and the server never had an answer.
func TestHTTPDeepServerRequest(t *testing.T) {
	answered := make(chan json.RawMessage, 1)
	pc, inits := deepCompletionProxy(t, func(w io.Writer, id json.RawMessage) {
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"maxTokens":5,"messages":`+nested(1001)+"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case a := <-answered:
			if !bytes.Contains(a, []byte(`"code":-32602`)) {
				t.Errorf("the server's deep request was answered with %.300s, want go-sdk's invalid params error", a)
			}
		case <-time.After(20 * time.Second):
			t.Error("the server's deep request was not answered in 20 s")
		}
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(id)+`,"result":{"completion":{"values":["made"]}}}`+"\n\n")
	}, func(w http.ResponseWriter, body []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if json.Unmarshal(body, &m) != nil || m.Method != nil || string(m.ID) != `"s1"` {
			return false
		}
		answered <- body
		w.WriteHeader(http.StatusAccepted)
		return true
	})
	pc.send(deepCompletion)
	if got := pc.read(); !bytes.Contains(got, []byte(`"made"`)) {
		t.Errorf("a completion whose stream holds a request nested too deep: %.300s", got)
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the proxy connected to the server %d times, want once: the deep request ended its connection", n)
	}
}

// deepCompletion is a client's completion/complete for the prompt of
// deepCompletionProxy's server.
const deepCompletion = `{"jsonrpc":"2.0","id":2,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"h__p"},"argument":{"name":"a","value":""}}}`

// deepCompletionProxy is a stdio client of a proxy in front of a real
// go-sdk server over HTTP ("h": a tool x that answers "made", a prompt p
// with completions) whose completion/complete is answered by complete,
// on an event stream, under the request's id; and the count of the
// server's initialize requests (the proxy's connections to it). A POST
// that answers is handed to answer, if one is given (the client's
// answers to the server's requests; nil: go-sdk's server serves them);
// true: it was served.
func deepCompletionProxy(t *testing.T, complete func(w io.Writer, id json.RawMessage), answer func(w http.ResponseWriter, body []byte) bool) (*pipeClient, *atomic.Int32) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "deep", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{}, nil
		},
	})
	srv.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "made"}}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "a"}}}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	inits := new(atomic.Int32)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := readIDMethod(r)
		if m.Method == "" && answer != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if answer(w, body) {
				return
			}
		}
		switch m.Method {
		case "initialize":
			inits.Add(1)
		case "completion/complete":
			w.Header().Set("Content-Type", "text/event-stream")
			complete(w, m.ID)
			return
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	p := startProxy(t, newTestLog(t), []ServerConfig{{ID: "h", URL: down.URL}}, nil)
	waitRouted(t, p, "h__x")
	return newPipeClient(t, p), inits
}

// TestShallowed: a server's request or notification nested deeper than
// go-sdk reads is read by go-sdk as one with its id and method and params
// it cannot decode, so that a request is answered with an error alone.
func TestShallowed(t *testing.T) {
	deep := nested(1001)
	for _, tc := range []struct{ msg, id, method string }{
		{`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":` + deep + `,"maxTokens":5}}`, `"s1"`, "sampling/createMessage"},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"d":` + deep + `}}`, ``, "notifications/progress"},
		{`{"params":{"d":` + deep + `},"id":7,"jsonrpc":"2.0","me\u0074hod":"elicitation/create"}`, `7`, "elicitation/create"},
	} {
		var wantID jsonrpc.ID // none: a notification
		if tc.id != "" {
			var v any
			json.Unmarshal([]byte(tc.id), &v)
			wantID, _ = jsonrpc.MakeID(v)
		}
		stand, ok := shallowed([]byte(tc.msg))
		if !ok {
			t.Errorf("%.60s: no stand-in", tc.msg)
			continue
		}
		m, err := jsonrpc.DecodeMessage(stand)
		req, isReq := m.(*jsonrpc.Request)
		if err != nil || !isReq || req.Method != tc.method || req.ID != wantID {
			t.Errorf("%.60s: go-sdk reads %s as %#v, %v", tc.msg, stand, m, err)
			continue
		}
		var params mcp.CreateMessageParams
		if json.Unmarshal(req.Params, &params) == nil {
			t.Errorf("%.60s: its params %s decode", tc.msg, req.Params)
		}
	}
	if _, ok := shallowed([]byte(`{"jsonrpc":"2.0","method":` + deep + `}`)); ok {
		t.Error("a method that is no string was stood in for")
	}
}

// FuzzShallowed: whatever shallowed stands in for a message with, go-sdk
// reads as a request or notification whose params are deepParams.
func FuzzShallowed(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"d":[[[]]]}}`))
	f.Add([]byte(`{"method":"notifications/progress"}`))
	f.Add([]byte(`{"id":null,"method":"\u0078"}`))
	f.Add([]byte(`{"id":1.5,"method":"x"}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		stand, ok := shallowed(v)
		if !ok {
			return
		}
		m, err := jsonrpc.DecodeMessage(stand)
		req, isReq := m.(*jsonrpc.Request)
		if err != nil || !isReq || string(req.Params) != deepParams {
			t.Fatalf("%q stood in for by %s, which go-sdk reads as %#v, %v", v, stand, m, err)
		}
	})
}
