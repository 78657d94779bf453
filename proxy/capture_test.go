package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	{`{"\u006dethod":"x"}`, false}, // go-sdk reads "method"; too rare to be read here
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
