package proxy

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
	"time"
)

// FuzzSSETeeRate: an sseTee past its server's budget passes on, for go-sdk,
// no event holding a request (a message naming a method, with an id):
// each is stood in for by an event without data, which go-sdk skips; the
// other events' data go on as they came (but an answer nested deeper than
// go-sdk reads, stood in for as ever), however the reads split them.
func FuzzSSETeeRate(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}\n\n" +
		"id: 7\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\n" + "data: \"id\":2,\"method\":\"roots/list\"}\n\n"))
	f.Add([]byte("data: {\"id\":null,\"method\":\"x\"}\n\ndata: {\"method\":\"x\",\"id\":[1]}"))
	f.Add([]byte(": c\n\nevent: message\ndata:{\"id\":3,\"method\":\"ping\"\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, split := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader} {
			future := time.Now().Add(time.Hour) // the budget spent, one refused this second: every request dropped
			var refused int
			tee := &sseTee{ReadCloser: io.NopCloser(split(bytes.NewReader(stream))), pending: &pendingCalls{},
				depthOnly: true, asks: &askBudget{last: future, refused: future, warn: func(int) { refused++ }}}
			out, err := io.ReadAll(tee)
			if err != nil {
				t.Fatal(err)
			}
			if refused != 0 {
				t.Fatalf("%d refused, want every request dropped", refused)
			}
			var in, got [][]byte
			new(sseParser).read(bytes.NewReader(stream), func(d []byte) bool {
				if !isRequest(d) && !pastSDKDepth(d) {
					in = append(in, bytes.Clone(d))
				}
				return true
			})
			new(sseParser).read(bytes.NewReader(out), func(d []byte) bool {
				if isRequest(d) {
					t.Fatalf("go-sdk read a request past the budget: %.200q", d)
				}
				if len(d) > 0 && !pastSDKDepth(d) {
					got = append(got, bytes.Clone(d))
				}
				return true
			})
			var inN [][]byte
			for _, d := range in {
				if len(d) > 0 {
					inN = append(inN, d)
				}
			}
			if len(inN) != len(got) {
				t.Fatalf("%d events besides requests went in, %d came out:\n%q\n%q", len(inN), len(got), stream, out)
			}
			for i := range got {
				if !bytes.Equal(inN[i], got[i]) {
					t.Fatalf("event %d: %.200q came out as %.200q", i, inN[i], got[i])
				}
			}
		}
	})
}

// isRequest says data is what askBudget holds to the budget: a message naming
// a method, with an id.
func isRequest(data []byte) bool {
	id, ok := topMember(data, "id")
	return namesMethod(data) && ok && len(id) > 0 && string(id) != "null"
}
