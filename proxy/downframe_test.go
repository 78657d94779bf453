package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// deepAnswer is an answer to id whose result nests depth levels.
func deepAnswer(id string, depth int) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"d":` + nested(depth-2) + `}}`
}

// standIn is what go-sdk reads in place of an answer to id a deepReader held.
func standIn(id string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, jsonrpc.CodeInternalError, deepStandIn)
}

// TestDeepReader: go-sdk reads a stdio server's stream as it came, but
// for each answer nested deeper than it reads, which it reads as an error
// answer to the same id while the answer is held, as parseWire reads it
// or with why it cannot; however the stream is cut into reads, and
// whatever spans lines.
func TestDeepReader(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"s":"[[[\"]]"}}`
	deepRequest := `{"jsonrpc":"2.0","id":9,"method":"x","params":` + nested(1001) + `}`
	spread := "{\"jsonrpc\":\"2.0\",\n \"id\":4,\r\n \"result\":{\"s\":\"a\\\"{\"}}"
	stream := ok + "\n" + deepAnswer(`2`, 1001) + "\n" + note + deepAnswer(`"s"`, 10001) + " \n" + deepRequest + "\n" + spread + "\n"
	want := ok + "\n" + standIn(`2`) + "\n" + note + standIn(`"s"`) + " \n" + deepRequest + "\n" + spread + "\n"
	for _, sizes := range [][]int{nil, {1}, {3, 7}, {4096}} {
		d := newDeepReader(&chunkReader{data: []byte(stream), sizes: sizes})
		got, err := io.ReadAll(d)
		if err != nil || string(got) != want {
			t.Errorf("reads of %v: go-sdk read %.300q (%v), want %.300q", sizes, got, err, want)
		}
		id2, _ := jsonrpc.MakeID(float64(2))
		if h, ok := d.take(id2); !ok || h.msg == nil || string(h.msg.Result) != `{"d":`+nested(999)+`}` {
			t.Errorf("reads of %v: held for 2: %v %v", sizes, ok, h)
		}
		idS, _ := jsonrpc.MakeID("s")
		if h, ok := d.take(idS); !ok || h.err == nil || !strings.Contains(h.err.Error(), "exceeded max depth") {
			t.Errorf("reads of %v: held for \"s\": %v %v", sizes, ok, h)
		}
		if len(d.held) != 0 {
			t.Errorf("reads of %v: held %v besides", sizes, d.held)
		}
	}
}

// FuzzDeepReader: whatever the stream and however it is cut into reads,
// go-sdk reads it as it came if nothing in it nests deeper than go-sdk
// reads; and an answer that does is held, go-sdk reading an error answer
// to its id in its place.
func FuzzDeepReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":[2,{\"c\":\"}\\\"\"}]}\r\n[1]\n"), []byte{3, 1}, uint16(1200))
	f.Add([]byte("  {\"x\":\"\\\\\"}\n7\n{}"), []byte{1}, uint16(2))
	f.Add([]byte("{\"a\":[1,\n{\"b\":}\n  x {\"c\":1}\n{\"d\":\"\\\n"), []byte{2, 5}, uint16(10005))
	f.Fuzz(func(t *testing.T, data, cuts []byte, depth uint16) {
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		got, err := io.ReadAll(newDeepReader(&chunkReader{data: data, sizes: sizes}))
		if err != nil {
			t.Fatal(err)
		}
		// Brackets outside strings or not, data nests no deeper than this.
		open, most := 0, 0
		for _, c := range data {
			switch c {
			case '{', '[':
				open++
				most = max(most, open)
			case '}', ']':
				open--
			}
		}
		if most <= sdkMaxDepth && !bytes.Equal(got, data) {
			t.Fatalf("go-sdk read %q of %q", got, data)
		}
		if lead := bytes.TrimLeft(data, " \t\r\n"); most > sdkMaxDepth || !json.Valid(data) || lead[0] != '{' && lead[0] != '[' {
			return
		}
		// After a value, an answer nested depth deep.
		depth = max(depth, 3)
		answer := deepAnswer("7", int(depth))
		stream := append(append(bytes.Clone(data), '\n'), answer...)
		d := newDeepReader(&chunkReader{data: stream, sizes: sizes})
		got, _ = io.ReadAll(d)
		id, _ := jsonrpc.MakeID(float64(7))
		h, held := d.take(id)
		switch {
		case int(depth) <= sdkMaxDepth && held, int(depth) > sdkMaxDepth && !held:
			t.Fatalf("depth %d: held %v", depth, held)
		case held && !bytes.HasSuffix(got, []byte("\n"+standIn("7"))):
			t.Fatalf("depth %d: go-sdk read %.200q…", depth, got)
		case held && h.msg == nil && depth <= 10000:
			t.Fatalf("depth %d: held no message: %v", depth, h.err)
		}
	})
}

// BenchmarkDeepReader reads a stdio server's stream of 4 KiB answers
// through a deepReader: what it adds to go-sdk's reading of the stream.
func BenchmarkDeepReader(b *testing.B) {
	msg := `{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` + strings.Repeat("text", 1024) + `"}]}}` + "\n"
	stream := []byte(strings.Repeat(msg, 256))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	buf := make([]byte, 32<<10)
	for b.Loop() {
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{newDeepReader(bytes.NewReader(stream))}, buf); err != nil {
			b.Fatal(err)
		}
	}
}
