package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deepAnswer is an answer to id whose result nests depth levels.
func deepAnswer(id string, depth int) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"d":` + nested(depth-2) + `}}`
}

// standIn is what go-sdk reads in place of an answer to id the proxy
// could not read, or an HTTP tee held.
func standIn(id string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, jsonrpc.CodeInternalError, deepStandIn)
}

// readValues reads every value of stream through a downReader, however
// it is cut into reads, and the error that ended it.
func readValues(stream []byte, sizes []int) ([]string, error) {
	d := newDownReader(&chunkReader{data: stream, sizes: sizes})
	var out []string
	for {
		v, err := d.next()
		if err != nil {
			return out, err
		}
		out = append(out, string(v))
	}
}

// TestDownReader: a stdio server's values, each ending its line, on one
// line or many, however the stream is cut into reads; what is no value,
// or follows one on its line, ends the stream, saying so.
func TestDownReader(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"s":"[[[\"]]"}}`
	spread := "{\"jsonrpc\":\"2.0\",\n \"id\":4,\r\n \"result\":{\"s\":\"a\\\"{\\n\"}}"
	batch := `[{"jsonrpc":"2.0","id":5,"result":{}}]`
	for _, tc := range []struct {
		name, stream string
		want         []string
		err          string // "" for io.EOF
	}{
		{"lines", ok + "\n" + note + "\r\n\n  " + spread + " \t\n" + batch + "\n", []string{ok, note, spread, batch}, ""},
		{"no line end at the end", ok, []string{ok}, ""},
		{"cut off", ok + "\n" + ok[:20], []string{ok}, io.ErrUnexpectedEOF.Error()},
		{"two on a line", ok + " " + ok + "\n", []string{ok}, "invalid trailing data after a message: '{'"},
		{"text", ok + "\nstarting up\n", []string{ok}, "invalid character 's' looking for beginning of value"},
		{"a number", "7\n", nil, "invalid character '7'"},
	} {
		for _, sizes := range [][]int{nil, {1}, {3, 7}, {4096}} {
			got, err := readValues([]byte(tc.stream), sizes)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s, reads of %v: %q, want %q", tc.name, sizes, got, tc.want)
			}
			if tc.err == "" && err != io.EOF || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("%s, reads of %v: ended with %v, want %q", tc.name, sizes, err, tc.err)
			}
		}
	}
	long := `{"s":"` + strings.Repeat("x", maxFrameBytes) + `"}` + "\n"
	if got, err := readValues([]byte(long), nil); len(got) != 0 || err == nil || !strings.Contains(err.Error(), "longer than 16 MiB") {
		t.Errorf("a value past maxFrameBytes: %d values, %v", len(got), err)
	}
}

// TestDecodeDown: an answer is read as parseWire reads an HTTP server's,
// its result as received with its canonical form, however deep up to
// encoding/json's bound; one past it fails its call alone (an error answer
// in its place, and why); what names a method go-sdk reads; what is no
// JSON-RPC message is an error, which ends the connection.
func TestDecodeDown(t *testing.T) {
	id := func(v any) jsonrpc.ID { i, _ := jsonrpc.MakeID(v); return i }
	for _, tc := range []struct {
		name, v string
		id      jsonrpc.ID
		result  string // the answer's result as go-sdk reads it
		canon   string
		unread  bool
		err     string
	}{
		{"answer", `{"jsonrpc":"2.0","id":7,"result":{"b":1, "a":"<"}}`, id(float64(7)), `{"b":1, "a":"<"}`, `{"a":"<","b":1}`, false, ""},
		{"beyond a double", `{"jsonrpc":"2.0","id":"s","result":{"n":1e999}}`, id("s"), `{"n":1e999}`, "", false, ""},
		{"deeper than go-sdk reads", deepAnswer("2", 1001), id(float64(2)), `{"d":` + nested(999) + `}`, "", false, ""},
		{"deeper than encoding/json reads", deepAnswer(`"s"`, 10001), id("s"), "", "", true, ""},
		{"no version", `{"id":1,"result":{}}`, jsonrpc.ID{}, "", "", false, "invalid message version tag"},
		{"no id", `{"jsonrpc":"2.0","result":{}}`, jsonrpc.ID{}, "", "", false, "an answer with no id"},
		{"an object id", `{"jsonrpc":"2.0","id":{},"result":{}}`, jsonrpc.ID{}, "", "", false, "an answer with no id"},
		{"a deep request", `{"jsonrpc":"2.0","id":9,"method":"x","params":` + nested(1001) + `}`, jsonrpc.ID{}, "", "", false, "depth"},
		{"empty batch", `[]`, jsonrpc.ID{}, "", "", false, "empty batch"},
	} {
		rs, _, err := decodeDown([]byte(tc.v))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(rs) != 1 {
			t.Errorf("%s: %v, %d messages", tc.name, err, len(rs))
			continue
		}
		r, _ := rs[0].msg.(*jsonrpc.Response)
		switch {
		case r == nil || r.ID != tc.id:
			t.Errorf("%s: go-sdk reads %#v", tc.name, rs[0].msg)
		case tc.unread && (rs[0].unread == nil || r.Error == nil || r.Error.Error() != deepStandIn):
			t.Errorf("%s: unread %v, go-sdk reads %v", tc.name, rs[0].unread, r.Error)
		case !tc.unread && (rs[0].unread != nil || string(r.Result) != tc.result || string(rs[0].canon) != tc.canon):
			t.Errorf("%s: result %.100s, canonical %.100s, unread %v", tc.name, r.Result, rs[0].canon, rs[0].unread)
		}
	}
	rs, batch, err := decodeDown([]byte(`[{"jsonrpc":"2.0","method":"notifications/message","params":{}},{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"no"}}]`))
	if err != nil || !batch || len(rs) != 2 {
		t.Fatalf("batch: %v %v %d", err, batch, len(rs))
	}
	if req, _ := rs[0].msg.(*jsonrpc.Request); req == nil || req.Method != "notifications/message" {
		t.Errorf("batch: %#v", rs[0].msg)
	}
	if r, _ := rs[1].msg.(*jsonrpc.Response); r == nil || r.Error == nil || r.Error.(*jsonrpc.Error).Code != -32001 {
		t.Errorf("batch: %#v", rs[1].msg)
	}
}

// TestStdioConnBatchAnswered: a batch of the server's requests is
// answered with one batch, once each is answered, in the requests' order,
// as go-sdk's connection answers it.
func TestStdioConnBatchAnswered(t *testing.T) {
	in := `[{"jsonrpc":"2.0","id":1,"method":"roots/list"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"ping"}]` + "\n"
	var out bytes.Buffer
	c := newStdioConn(strings.NewReader(in), nopWriteCloser{&out}, 0)
	defer c.Close()
	ctx := context.Background()
	var reqs []*jsonrpc.Request
	for range 3 {
		m, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, m.(*jsonrpc.Request))
	}
	if err := c.Write(ctx, &jsonrpc.Response{ID: reqs[2].ID, Result: json.RawMessage(`{}`)}); err != nil || out.Len() != 0 {
		t.Fatalf("one of two answers: %v, wrote %q", err, out.String())
	}
	if err := c.Write(ctx, &jsonrpc.Response{ID: reqs[0].ID, Result: json.RawMessage(`{"roots":[]}`)}); err != nil {
		t.Fatal(err)
	}
	want := `[{"jsonrpc":"2.0","id":1,"result":{"roots":[]}},{"jsonrpc":"2.0","id":"b","result":{}}]` + "\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
	if _, err := c.Read(ctx); err != io.EOF {
		t.Errorf("after the stream: %v", err)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// FuzzDownReader: whatever a server writes and however it is cut into
// reads, the reader ends (with an error or at the end), and a stream of
// valid values, each on its line, is read value for value.
func FuzzDownReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":[2,{\"c\":\"}\\\"\"}]}\r\n[1]\n"), []byte{3, 1})
	f.Add([]byte("  {\"x\":\"\\\\\"}\n7\n{}"), []byte{1})
	f.Add([]byte("{\"a\":[1,\n{\"b\":}\n  x {\"c\":1}\n{\"d\":\"\\\n"), []byte{2, 5})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		got, err := readValues(data, sizes)
		for _, v := range got {
			if _, _, derr := decodeDown([]byte(v)); derr != nil && errors.Is(derr, io.EOF) {
				t.Fatalf("decoding %q: %v", v, derr)
			}
		}
		var want []string
		for line := range bytes.Lines(data) {
			line = bytes.Trim(line, " \t\r\n") // JSON's white space
			if len(line) == 0 {
				continue
			}
			if !json.Valid(line) || line[0] != '{' && line[0] != '[' {
				return
			}
			want = append(want, string(line))
		}
		if err != io.EOF || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	})
}

// BenchmarkStdioRead: a stdio server's stream of answers (1 KiB and 16
// KiB results) read and decoded by stdioConn, and by go-sdk's connection
// (sdk), which the proxy used before.
func BenchmarkStdioRead(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		msg := `{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` + strings.Repeat("t", size) + `"}]}}` + "\n"
		stream := []byte(strings.Repeat(msg, 64))
		read := func(b *testing.B, c mcp.Connection) {
			for range 64 {
				if m, err := c.Read(context.Background()); err != nil || m.(*jsonrpc.Response).Result == nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(fmt.Sprintf("stdioConn-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				read(b, newStdioConn(bytes.NewReader(stream), nopWriteCloser{io.Discard}, 0))
			}
		})
		b.Run(fmt.Sprintf("sdk-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				c, err := (&mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(stream)), Writer: nopWriteCloser{io.Discard}}).Connect(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				read(b, c)
			}
		})
	}
}

// FuzzDecodeDownAsSDK: a message go-sdk's jsonrpc reads, the proxy reads
// as the same message: a request or notification with the same id,
// method and params, an answer with the same id and result or error. (The
// proxy reads some go-sdk refuses: an answer nested deeper than its
// decoder reads.)
func FuzzDecodeDownAsSDK(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{"messages":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"","params":null}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"method":"x"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","\u006dethod":"x","params":[1e999]}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{"a":"<"},"params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7.5,"error":{"code":-1,"message":"m","data":[1]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","ID":2,"id":7,"Result":{"n":1e999},"result":{"n":2e999}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"Error":{"code":1,"message":"x"},"result":{"a":1,"a":2}}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		if len(v) == 0 || v[0] != '{' || !json.Valid(v) {
			return // decodeDown hands decodeDownOne whole objects, a batch's one by one
		}
		want, werr := jsonrpc.DecodeMessage(v)
		if werr != nil {
			return
		}
		got, err := decodeDownOne(v)
		if err != nil {
			t.Fatalf("go-sdk reads %s; the proxy: %v", v, err)
		}
		compact := func(b json.RawMessage) string {
			var buf bytes.Buffer
			if json.Compact(&buf, b) != nil {
				return string(b)
			}
			return buf.String()
		}
		switch w := want.(type) {
		case *jsonrpc.Request:
			g, ok := got.msg.(*jsonrpc.Request)
			if !ok || g.ID != w.ID || g.Method != w.Method || compact(g.Params) != compact(w.Params) {
				t.Fatalf("%s: go-sdk reads %#v, the proxy %#v", v, w, got.msg)
			}
		case *jsonrpc.Response:
			g, ok := got.msg.(*jsonrpc.Response)
			if !ok || g.ID != w.ID || (g.Error == nil) != (w.Error == nil) {
				t.Fatalf("%s: go-sdk reads %#v, the proxy %#v", v, w, got.msg)
			}
			if w.Error != nil {
				we, ge := w.Error.(*jsonrpc.Error), g.Error.(*jsonrpc.Error)
				if we.Code != ge.Code || we.Message != ge.Message || compact(we.Data) != compact(ge.Data) {
					t.Fatalf("%s: go-sdk reads error %#v, the proxy %#v", v, we, ge)
				}
			} else if compact(g.Result) != compact(w.Result) {
				t.Fatalf("%s: go-sdk reads result %s, the proxy %s", v, w.Result, g.Result)
			}
		}
	})
}
