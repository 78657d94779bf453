package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// namesMethodCases are messages and whether namesMethod is sure they name
// a method at their top level.
var namesMethodCases = []struct {
	msg  string
	want bool
}{
	{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"fixture:///w"}}`, true},
	{`{"params":{"a":[1,{"method":"x"}],"s":"}\"method\"","t":true,"n":-1.5e3},"method":"x","jsonrpc":"2.0"}`, true},
	{" {\n\t\"jsonrpc\" : \"2.0\" ,\r\n \"id\" : null , \"method\" : \"x\" }", true},
	{`{"s":"\\","method":"x"}`, true},
	{`{"jsonrpc":"2.0","id":3,"method":""}`, true},
	{`{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"no \"method\" here"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":{"method":"x"}}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
	{`{"\u006dethod":"x"}`, true}, // go-sdk reads "method" too
	{`{"\u006dethod":"x","id":1,"result":{}}`, true},
	{`{"method\u0000":"x","id":1,"result":{}}`, false},
	{`{"method"}`, false},
	{`{"jsonrpc":"2.0","id":1,"result":{}`, false},
	{`[{"jsonrpc":"2.0","method":"x"}]`, false},
	{`{"a" "method":"x"}`, false},
	{`{"a":"method`, false},
	{`{}`, false},
	{``, false},
}

// TestNamesMethod: the events of a stream that are not decoded are those
// go-sdk reads as requests or notifications.
func TestNamesMethod(t *testing.T) {
	for _, tc := range namesMethodCases {
		if got := namesMethod([]byte(tc.msg)); got != tc.want {
			t.Errorf("namesMethod(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// FuzzNamesMethod: whatever namesMethod is sure names a method, go-sdk
// decodes as a request, or not at all; it is never a response the tee
// would have missed.
func FuzzNamesMethod(f *testing.F) {
	for _, tc := range namesMethodCases {
		f.Add([]byte(tc.msg))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !namesMethod(data) {
			return
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return
		}
		if _, ok := msg.(*jsonrpc.Request); !ok {
			t.Errorf("namesMethod(%q) is sure of a method; go-sdk reads %T", data, msg)
		}
	})
}

// BenchmarkListenStream reads a listen's event stream of resources/updated
// notifications through the tee that looks for the listen's refusal: what
// the capture adds to go-sdk's own reading of the stream, per event.
func BenchmarkListenStream(b *testing.B) {
	const events = 1000
	event := "event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"fixture:///watched/with/a/longer/path/name.json","_meta":{"io.modelcontextprotocol/related":{"kind":"file","size":12345}}}}` + "\n\n"
	stream := []byte(strings.Repeat(event, events))
	id, _ := jsonrpc.MakeID(float64(1))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		p := &pendingCalls{listenHooks: listenHooks{refused: func([]string, error) {}}}
		p.m.Store(id, listenURIs{"fixture:///watched"})
		tee := &sseTee{ReadCloser: io.NopCloser(bytes.NewReader(stream)), pending: p}
		if _, err := io.Copy(io.Discard, tee); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// scriptedConn is a connection whose server's messages are msgs, in turn.
type scriptedConn struct {
	mcp.Connection
	msgs []jsonrpc.Message
}

func (s *scriptedConn) Read(context.Context) (jsonrpc.Message, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func (s *scriptedConn) Write(context.Context, jsonrpc.Message) error { return nil }

// TestResultTakenFromGoSDK: a stdio server's result to a request whose
// capture takes it (a tools/call's, sdkCall) is the capture's alone:
// go-sdk gets errTaken in its place and so decodes nothing; any other
// answer, and one to a capture that does not take it, go-sdk reads as
// it came.
func TestResultTakenFromGoSDK(t *testing.T) {
	ctx := context.Background()
	result := json.RawMessage(`{"content":[{"type":"text","text":"x"}],"zeta":1}`)
	werr := &jsonrpc.Error{Code: -32001, Message: "no"}
	for _, tc := range []struct {
		name  string
		taken bool
		resp  *jsonrpc.Response
		stand bool // go-sdk gets errTaken
	}{
		{"taken result", true, &jsonrpc.Response{Result: result}, true},
		{"taken, an error answer", true, &jsonrpc.Response{Error: werr}, false},
		{"taken, an empty answer", true, &jsonrpc.Response{}, false},
		{"not taken", false, &jsonrpc.Response{Result: result}, false},
	} {
		id, _ := jsonrpc.MakeID(float64(7))
		tc.resp.ID = id
		cc := &captureConn{Connection: &scriptedConn{msgs: []jsonrpc.Message{tc.resp}}, asks: &askBudget{}}
		cp := &capture{taken: tc.taken}
		if err := cc.Write(withCapture(ctx, cp), &jsonrpc.Request{ID: id, Method: "tools/call"}); err != nil {
			t.Fatal(err)
		}
		got, err := cc.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r, _ := got.(*jsonrpc.Response)
		switch {
		case r == nil || r.ID != id:
			t.Errorf("%s: go-sdk got %#v", tc.name, got)
		case tc.stand && (r.Error != errTaken || r.Result != nil):
			t.Errorf("%s: go-sdk got the answer (%s, %v), not the stand-in", tc.name, r.Result, r.Error)
		case !tc.stand && r != tc.resp:
			t.Errorf("%s: go-sdk got %#v, not the answer as it came", tc.name, r)
		}
		if tc.resp.Result != nil && !bytes.Equal(cp.last(), result) {
			t.Errorf("%s: the capture holds %s", tc.name, cp.last())
		}
		if tc.resp.Error != nil && cp.remoteError() != werr {
			t.Errorf("%s: the capture's error is %v", tc.name, cp.remoteError())
		}
	}
}
