package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzParseFast: the fast path's reading of a client's POST body never
// panics, and what it takes is one JSON-RPC message with exactly the
// protocol's members, as the SDK would read it.
func FuzzParseFast(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__b","arguments":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a__b","_meta":{"progressToken":3}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{}}`,
		` {"jsonrpc":"2.0","id":-1,"method":"x","params":{}} `,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fr, ok := parseFast(body)
		if !ok {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("took a body that is not a JSON object: %v", err)
		}
		for k := range top {
			if k != "jsonrpc" && k != "id" && k != "method" && k != "params" {
				t.Fatalf("took a body with member %q", k)
			}
		}
		if string(top["jsonrpc"]) != `"2.0"` || fr.method == "" {
			t.Fatalf("took %s", body)
		}
		if fr.id != nil && (string(fr.id) == "null" || fr.id[0] == '{' || fr.id[0] == '[' || fr.id[0] == 't' || fr.id[0] == 'f') {
			t.Fatalf("took id %s", fr.id)
		}
		if _, has := top["params"]; has && fr.params == nil {
			t.Fatalf("params %s read as none", top["params"])
		}
	})
}

// FuzzFrontResult: a downstream's result, whatever its bytes, comes out
// as a JSON object with the receipt in its _meta and every other member
// as the server sent it; anything else is an error, never a panic.
func FuzzFrontResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{}`, ` { } `,
		`{"content":[],"_meta":{"a":1}}`,
		`{"_meta":null}`, `{"_meta":[1]}`,
		`{"content":[{"type":"resource_link","uri":"x://y","name":"n"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"x://y","text":"t"}}]}`,
		`{"content":[{"type":"resource_link","uri":"x://y"}],"_m\u0065ta":{"z":2}}`,
		`[1,2]`, `null`, `"s"`, `{"a":1}x`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, keepURIs bool) {
		d := &downstream{cfg: ServerConfig{ID: "x"}}
		if keepURIs {
			empty := ""
			d.cfg.Prefix = &empty
		}
		out, err := d.frontResult(raw, "receipt\ntext")
		if err != nil {
			return
		}
		var in, got map[string]any
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatalf("took a result that is not a JSON object: %s", raw)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("made invalid JSON %s: %v", out, err)
		}
		var keys int
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.Token()
		for dec.More() {
			tok, _ := dec.Token()
			if tok == "_meta" {
				keys++
			}
			var skip json.RawMessage
			dec.Decode(&skip)
		}
		if keys != 1 {
			t.Fatalf("%d _meta members in %s", keys, out)
		}
		meta, _ := got["_meta"].(map[string]any)
		if meta[ReceiptKey] != "receipt\ntext" {
			t.Fatalf("no receipt in %s", out)
		}
		if old, ok := in["_meta"].(map[string]any); ok {
			for k, v := range old {
				if k != ReceiptKey && !reflect.DeepEqual(meta[k], v) {
					t.Fatalf("_meta member %q lost: %s -> %s", k, raw, out)
				}
			}
		}
		for k, v := range in {
			if k == "_meta" || k == "content" && !keepURIs {
				continue
			}
			if !reflect.DeepEqual(got[k], v) {
				t.Fatalf("member %q changed: %s -> %s", k, raw, out)
			}
		}
	})
}

// FuzzReadEvents: reading a downstream's event stream never panics, and
// an event's data is what its data lines say, split across reads or not.
func FuzzReadEvents(f *testing.F) {
	for _, s := range []string{
		"event: message\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\n",
		"data: a\ndata:b\n\n: comment\ndata: c\n\n",
		"data: unterminated",
		"\n\n\ndata\n\n",
		"data: " + strings.Repeat("x", 40000) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var whole, bytewise [][]byte
		if err := readEvents(bytes.NewReader(stream), func(d []byte) bool {
			whole = append(whole, append([]byte(nil), d...))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if err := readEvents(iotest.OneByteReader(bytes.NewReader(stream)), func(d []byte) bool {
			bytewise = append(bytewise, append([]byte(nil), d...))
			return true
		}); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("events differ by read size: %q vs %q", whole, bytewise)
		}
		// Every event's data is made of data lines.
		for _, ev := range whole {
			for _, line := range bytes.Split(ev, []byte("\n")) {
				if !bytes.Contains(stream, line) {
					t.Fatalf("event data %q is not in the stream", line)
				}
			}
		}
	})
}

func TestReadEvents(t *testing.T) {
	stream := ": hi\r\nevent: message\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata:x\n\ndata: last"
	var got []string
	if err := readEvents(strings.NewReader(stream), func(d []byte) bool {
		got = append(got, string(d))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"{\"a\":\n1}", "x", "last"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	// fn returning false stops the reading.
	n := 0
	readEvents(strings.NewReader(stream), func([]byte) bool { n++; return false })
	if n != 1 {
		t.Errorf("read %d events after being told to stop", n)
	}
}

func TestFrontResult(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "fx"}}
	for _, tc := range []struct{ in, want string }{
		{`{"content":[{"type":"text","text":"a"}],"isError":false}`, `{"_meta":{"dev.provlog/receipt":"R"},"content":[{"type":"text","text":"a"}],"isError":false}`},
		{` {} `, `{"_meta":{"dev.provlog/receipt":"R"}} `},
		{`{"_meta":{"k":1},"content":[]}`, `{"_meta":{"dev.provlog/receipt":"R","k":1},"content":[]}`},
		{`{"content":[{"type":"resource_link","uri":"a://b","name":"n"},{"type":"resource","resource":{"uri":"a://c","text":"t"}}]}`,
			`{"_meta":{"dev.provlog/receipt":"R"},"content":[{"name":"n","type":"resource_link","uri":"fx+a://b"},{"resource":{"text":"t","uri":"fx+a://c"},"type":"resource"}]}`},
	} {
		got, err := d.frontResult(json.RawMessage(tc.in), "R")
		if err != nil || string(got) != tc.want {
			t.Errorf("frontResult(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `null`, `{"_meta":[1]}`, `{`} {
		if got, err := d.frontResult(json.RawMessage(bad), "R"); err == nil {
			t.Errorf("frontResult(%s) = %s, want an error", bad, got)
		}
	}
}
