package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestSSETeeHoldsDeepAnswer: an sseTee passes an event stream on as it
// came, however the body's reads split it, but for the data of an answer
// nested deeper than go-sdk reads, which the capture gets and go-sdk
// reads as an error answer to its id, the event's other lines kept; and
// an event the stream does not end goes on as it came.
func TestSSETeeHoldsDeepAnswer(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":2,"result":{"d":` + nested(1001) + `}}`
	head := ": note\r\nevent: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"
	tail := "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}"
	stream := head + "id: e2\r\ndata: " + deep + "\r\n\r\n" + tail
	want := head + "id: e2\r\ndata: " + standIn(`2`) + "\n\n" + tail
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":  func(r io.Reader) io.Reader { return r },
		"bytes":  iotest.OneByteReader,
		"halves": iotest.HalfReader,
	} {
		p := &pendingCalls{}
		cps := map[int64]*capture{}
		for _, n := range []int64{1, 2, 3} {
			id, _ := jsonrpc.MakeID(float64(n))
			cps[n] = &capture{}
			p.m.Store(id, cps[n])
		}
		tee := &sseTee{ReadCloser: io.NopCloser(wrap(strings.NewReader(stream))), pending: p}
		got, err := io.ReadAll(iotest.OneByteReader(tee))
		if err != nil || string(got) != want {
			t.Errorf("%s: go-sdk read %q, %v; want %q", name, got, err, want)
		}
		if r := cps[2].last(); !bytes.Equal(r, []byte(`{"d":`+nested(1001)+`}`)) {
			t.Errorf("%s: the capture got %.80q, want the deep result", name, r)
		}
		if cps[1].last() == nil {
			t.Errorf("%s: the first answer was not delivered", name)
		}
	}
}

// TestDepthOnlyTees: under a request the proxy does not capture, a tee
// decodes nothing (a capture waiting under the answer's id gets nothing:
// the client's work is not doubled) and passes every byte on as it came,
// but for an answer nested deeper than go-sdk reads, for which go-sdk
// reads an error answer to its id.
func TestDepthOnlyTees(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":2,"result":{"d":` + nested(1001) + `}}`
	plain := `{"jsonrpc":"2.0","id":1,"result":{}}`
	for _, tc := range []struct {
		name     string
		tee      func(body string, p *pendingCalls) io.Reader
		body     string
		want     string
		deepCase bool
	}{
		{"sse plain", func(b string, p *pendingCalls) io.Reader {
			return &sseTee{ReadCloser: io.NopCloser(strings.NewReader(b)), pending: p, depthOnly: true}
		}, "data: " + plain + "\n\n", "data: " + plain + "\n\n", false},
		{"sse deep", func(b string, p *pendingCalls) io.Reader {
			return &sseTee{ReadCloser: io.NopCloser(strings.NewReader(b)), pending: p, depthOnly: true}
		}, "id: e\ndata: " + deep + "\n\n", "id: e\ndata: " + standIn(`2`) + "\n\n", true},
		{"json plain", func(b string, p *pendingCalls) io.Reader {
			return &jsonTee{ReadCloser: io.NopCloser(strings.NewReader(b)), pending: p, depthOnly: true}
		}, plain, plain, false},
		{"json deep", func(b string, p *pendingCalls) io.Reader {
			return &jsonTee{ReadCloser: io.NopCloser(strings.NewReader(b)), pending: p, depthOnly: true}
		}, deep, standIn(`2`), true},
	} {
		p := &pendingCalls{}
		cp := &capture{}
		for _, n := range []float64{1, 2} {
			id, _ := jsonrpc.MakeID(n)
			p.m.Store(id, cp)
		}
		got, err := io.ReadAll(tc.tee(tc.body, p))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: go-sdk read %.120q, %v; want %.120q", tc.name, got, err, tc.want)
		}
		if r := cp.last(); r != nil && !tc.deepCase {
			t.Errorf("%s: the tee decoded the answer (the capture got %.80q)", tc.name, r)
		}
	}
}
