package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/provlog/provlog/log"
)

// FuzzParseFast: the fast path's reading of a client's POST body never
// panics, and what it takes is one JSON-RPC message with exactly the
// protocol's members, as the SDK would read it.
func FuzzParseFast(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__b","arguments":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a__b","_meta":{"progressToken":3}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"params":{"arguments":{"b":[1.0,{"z":null,"a":"\u00e9"}],"a":1},"name":"a__b","_meta":{"k":1},"x":2},"method":"tools/call","id":7,"jsonrpc":"2.0"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{}}`,
		` {"jsonrpc":"2.0","id":-1,"method":"x","params":{}} `,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":[]}`,
		`{"jsonrpc":"2.0","id":"provlog-ask-1","result":{"model":"m"}}`,
		`{"jsonrpc":"2.0","id":"provlog-ask-1","error":{"code":-1,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":"provlog-ask-1","result":{},"error":{"code":-1,"message":"no"}}`,
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
			if k != "jsonrpc" && k != "id" && k != "method" && k != "params" && k != "result" && k != "error" {
				t.Fatalf("took a body with member %q", k)
			}
		}
		if string(top["jsonrpc"]) != `"2.0"` || fr.method == "" && fr.result == nil && fr.err == nil {
			t.Fatalf("took %s", body)
		}
		if fr.method == "" && (fr.id == nil || top["params"] != nil || fr.result != nil && fr.err != nil) {
			t.Fatalf("took %s as a response", body)
		}
		if fr.id != nil && (string(fr.id) == "null" || fr.id[0] == '{' || fr.id[0] == '[' || fr.id[0] == 't' || fr.id[0] == 'f') {
			t.Fatalf("took id %s", fr.id)
		}
		if _, has := top["params"]; has && fr.params == nil {
			t.Fatalf("params %s read as none", top["params"])
		}
		// params' members, read in the same pass, are those a walk of
		// params on its own finds.
		var alone fastRequest
		if fr.params != nil {
			if err := log.WalkObject(fr.params, alone.fastParam); err != nil {
				t.Fatalf("params %s do not walk: %v", fr.params, err)
			}
		}
		if fr.name != alone.name || !bytes.Equal(fr.args, alone.args) || !bytes.Equal(fr.argsCanon, alone.argsCanon) ||
			!bytes.Equal(fr.meta, alone.meta) || !bytes.Equal(fr.requestID, alone.requestID) || fr.other != alone.other {
			t.Fatalf("params %s read as %+v, on their own as %+v", fr.params, fr, alone)
		}
	})
}

// FuzzFrontResult: a downstream's result, of a tools/call, a
// resources/read or a prompts/get, whatever its bytes, comes out as a
// JSON object with the receipt in its _meta and every other member as the
// server sent it, but for the URIs given their front form; anything else
// is an error, never a panic.
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
		`{"_meta":{"dev.provlog/receipt":"forged","k":1}}`, `{"_meta":{ },"a":1}`, `{"_meta":{"k":{"dev.provlog/receipt":1}}}`,
		` { "_m\u0065ta" : { "k" : 1 } , "c":[] } `, `{"a":{"_meta":1},"_meta":{"b":2}}`,
		`{"a":"\\","_meta":{"k":1}}`, `{"a":"\\\",\"_meta\":{","b":1}`, `{"a":"<\u003e","c":[{"_meta":{}}]}`,
		`{"contents":[{"uri":"x://y","text":"<b>"}],"_meta":{"k":1}}`, `{"contents":[null,{"uri":1}]}`,
		`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"x://y","text":"t"}}}],"z":"&"}`,
		`{"messages":[null,{"content":null},{"content":{"type":"resource_link","uri":""}}]}`,
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
		for _, method := range []string{"tools/call", "resources/read", "prompts/get"} {
			checkFront(t, d, method, raw, keepURIs)
		}
	})
}

// checkFront is FuzzFrontResult's check of raw, a result of method.
func checkFront(t *testing.T, d *downstream, method string, raw []byte, keepURIs bool) {
	out, err := frontFor(d, method, raw, nil, "receipt\ntext")
	if canon, cerr := log.Canonicalize(raw); cerr == nil {
		// Its reader canonicalized it: the same answer, read from
		// the canonical form (spliced where escapes kept it from
		// being spliced without: the same JSON value).
		cout, cerr := frontFor(d, method, raw, canon, "receipt\ntext")
		var a, b any
		if (cerr == nil) != (err == nil) || err == nil && (json.Unmarshal(out, &a) != nil || json.Unmarshal(cout, &b) != nil || !reflect.DeepEqual(a, b)) {
			t.Fatalf("%s %s with its canonical form: %s, %v; without: %s, %v", method, raw, cout, cerr, out, err)
		}
		if err == nil {
			out = cout // checked as the other below
		}
	}
	if err != nil {
		return
	}
	var in, got map[string]any
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("%s: took a result that is not a JSON object: %s", method, raw)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: made invalid JSON %s: %v", method, out, err)
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
		t.Fatalf("%s: %d _meta members in %s", method, keys, out)
	}
	meta, _ := got["_meta"].(map[string]any)
	if meta[ReceiptKey] != "receipt\ntext" {
		t.Fatalf("%s: no receipt in %s", method, out)
	}
	if old, ok := in["_meta"].(map[string]any); ok {
		for k, v := range old {
			if k != ReceiptKey && !reflect.DeepEqual(meta[k], v) {
				t.Fatalf("%s: _meta member %q lost: %s -> %s", method, k, raw, out)
			}
		}
	}
	for k, v := range in {
		if k == "_meta" || k == uriMember(method) && !keepURIs {
			continue
		}
		if !reflect.DeepEqual(got[k], v) {
			t.Fatalf("%s: member %q changed: %s -> %s", method, k, raw, out)
		}
	}
	if method != "resources/read" || keepURIs {
		return
	}
	// What was read is at its front URI.
	was, _ := in["contents"].([]any)
	now, _ := got["contents"].([]any)
	for i, c := range was {
		was, _ := c.(map[string]any)
		now, _ := now[i].(map[string]any)
		if uri, _ := was["uri"].(string); uri != "" && now["uri"] != "x+"+uri {
			t.Fatalf("contents[%d] at %v: %s -> %s", i, now["uri"], raw, out)
		}
	}
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
		"event: prime\nid: s_0\nretry: 1000\ndata: \n\nretry: 10\n\nid: s\x001\nretry: 1e3\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		var whole, bytewise [][]byte
		var wp, bp sseParser
		if err := wp.read(bytes.NewReader(stream), func(d []byte) bool {
			whole = append(whole, append([]byte(nil), d...))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if err := bp.read(iotest.OneByteReader(bytes.NewReader(stream)), func(d []byte) bool {
			bytewise = append(bytewise, append([]byte(nil), d...))
			return true
		}); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("events differ by read size: %q vs %q", whole, bytewise)
		}
		// The id and retry a resuming client needs do not depend on it either.
		if string(wp.lastID) != string(bp.lastID) || wp.retry != bp.retry || wp.hasRetry != bp.hasRetry {
			t.Fatalf("id %q retry %d/%v vs id %q retry %d/%v", wp.lastID, wp.retry, wp.hasRetry, bp.lastID, bp.retry, bp.hasRetry)
		}
		if bytes.IndexByte(wp.lastID, 0) >= 0 || wp.retry < 0 || wp.retry > 999999999 {
			t.Fatalf("id %q, retry %d", wp.lastID, wp.retry)
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
	if err := new(sseParser).read(strings.NewReader(stream), func(d []byte) bool {
		got = append(got, string(d))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"{\"a\":\n1}", "x", "last"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	// The stream's last id and retry, for a client that resumes it.
	var sp sseParser
	sp.read(strings.NewReader("id: a_1\nretry: 250\ndata: x\n\nid: a_2\nretry: x\ndata: y\n\n"), func([]byte) bool { return true })
	if string(sp.lastID) != "a_2" || !sp.hasRetry || sp.retry != 250 {
		t.Errorf("last id %q, retry %d (%v), want a_2 and 250", sp.lastID, sp.retry, sp.hasRetry)
	}
	// fn returning false stops the reading.
	n := 0
	new(sseParser).read(strings.NewReader(stream), func([]byte) bool { n++; return false })
	if n != 1 {
		t.Errorf("read %d events after being told to stop", n)
	}
}

// frontFor is raw, a result of method as received, as the client gets it
// with receipt, as the call and read paths make it: prepared
// (frontPrepare; a call's when its outcome is classified), the receipt
// added once recorded.
func frontFor(d *downstream, method string, raw json.RawMessage, canon []byte, receipt string) (json.RawMessage, error) {
	f, err := d.frontPrepare(method, raw, canon)
	if err != nil {
		return nil, err
	}
	return f.result(raw, receipt)
}

func TestFrontResult(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "fx"}}
	for _, tc := range []struct{ in, want, wantCanon string }{
		{`{"content":[{"type":"text","text":"a"}],"isError":false}`, `{"_meta":{"dev.provlog/receipt":"R"},"content":[{"type":"text","text":"a"}],"isError":false}`, ""},
		{` {} `, `{"_meta":{"dev.provlog/receipt":"R"}} `, ""},
		{`{"_meta":{"k":1},"content":[]}`, `{"_meta":{"dev.provlog/receipt":"R","k":1},"content":[]}`, ""},
		{`{"content":[{"type":"resource_link","uri":"a://b","name":"n"},{"type":"resource","resource":{"uri":"a://c","text":"t"}}]}`,
			`{"_meta":{"dev.provlog/receipt":"R"},"content":[{"name":"n","type":"resource_link","uri":"fx+a://b"},{"resource":{"text":"t","uri":"fx+a://c"},"type":"resource"}]}`, ""},
		// Read from its canonical form: the receipt spliced into the
		// result's own _meta, the rest as sent.
		{`{"z":"\u003c", "_m\u0065ta" : { "k" : 1 } }`, `{"_meta":{"dev.provlog/receipt":"R","k":1},"z":"\u003c"}`,
			`{"z":"\u003c", "_m\u0065ta" : {"dev.provlog/receipt":"R", "k" : 1 } }`},
		{`{"_meta":{ },"a":1}`, `{"_meta":{"dev.provlog/receipt":"R"},"a":1}`, `{"_meta":{"dev.provlog/receipt":"R" },"a":1}`},
		{`{"_meta":{"dev.provlog/receipt":"forged"}}`, `{"_meta":{"dev.provlog/receipt":"R"}}`, `{"_meta":{"dev.provlog/receipt":"R"}}`},
	} {
		got, err := frontFor(d, "tools/call", json.RawMessage(tc.in), nil, "R")
		if err != nil || string(got) != tc.want {
			t.Errorf("frontResult(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		if tc.wantCanon == "" {
			continue
		}
		canon, err := log.Canonicalize([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := frontFor(d, "tools/call", json.RawMessage(tc.in), canon, "R"); err != nil || string(got) != tc.wantCanon {
			t.Errorf("frontResult(%s), canonical form known, = %s, %v; want %s", tc.in, got, err, tc.wantCanon)
		}
	}
	// Reads alike: URIs to give their front form, or none.
	for _, tc := range []struct{ method, in, want string }{
		{"resources/read", `{"contents":[{"uri":"a://b","text":"<"}]}`, `{"_meta":{"dev.provlog/receipt":"R"},"contents":[{"text":"\u003c","uri":"fx+a://b"}]}`},
		{"prompts/get", `{"messages":[{"role":"user","content":{"type":"resource_link","uri":"a://b","name":"n"}}]}`,
			`{"_meta":{"dev.provlog/receipt":"R"},"messages":[{"content":{"name":"n","type":"resource_link","uri":"fx+a://b"},"role":"user"}]}`},
		{"prompts/get", `{"messages":[],"b":"<"}`, `{"_meta":{"dev.provlog/receipt":"R"},"messages":[],"b":"<"}`},
		{"prompts/get", `{"messages":[],"_meta":{"k":1}}`, `{"_meta":{"dev.provlog/receipt":"R","k":1},"messages":[]}`},
	} {
		if got, err := frontFor(d, tc.method, json.RawMessage(tc.in), nil, "R"); err != nil || string(got) != tc.want {
			t.Errorf("%s: frontFor(%s) = %s, %v; want %s", tc.method, tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `null`, `{"_meta":[1]}`, `{`} {
		if got, err := frontFor(d, "tools/call", json.RawMessage(bad), nil, "R"); err == nil {
			t.Errorf("frontResult(%s) = %s, want an error", bad, got)
		}
	}
}

// FuzzFastArgs: the fast path's canonical arguments make the same call
// entry as the SDK path's decoded ones (redactArgs), for any arguments the
// fast path takes.
func FuzzFastArgs(f *testing.F) {
	for _, s := range []string{
		`{"a":1.0,"b":[1e2,-0,"\u00e9"],"c":{"z":null,"a":true}}`,
		`{"big":12345678901234567890123,"tiny":1e-400,"s":"\ud83d\ude00\u2028"}`,
		`{}`, `null`, `{"a":1,"a":2}`, `{"a":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var canon []byte
		params := append(append([]byte(`{"arguments":`), raw...), '}')
		if log.WalkObject(params, func(_ string, r, c []byte) error {
			if r[0] != '{' {
				return errNotFast
			}
			canon = bytes.Clone(c)
			return nil
		}) != nil {
			return // the SDK path's
		}
		decoded, _, err := redactArgs(raw, nil, false)
		if err != nil {
			t.Fatalf("the fast path took arguments the SDK path refuses: %v", err)
		}
		when := time.Unix(0, 0)
		a, aerr := (&log.Entry{Kind: "call", Time: when, Fields: map[string]any{"args": log.CanonicalJSON(canon)}}).Marshal()
		b, berr := (&log.Entry{Kind: "call", Time: when, Fields: map[string]any{"args": decoded}}).Marshal()
		if (aerr == nil) != (berr == nil) || !bytes.Equal(a, b) {
			t.Fatalf("fast path entry %s (%v), SDK path entry %s (%v)", a, aerr, b, berr)
		}
	})
}

// FuzzParseWire: a server's message reads the same in parseWire's one
// pass as with encoding/json (member names as sent), and the result's
// canonical form is Canonicalize's.
func FuzzParseWire(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"provlog-1","result":{"content":[{"type":"text","text":"hi"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"isError":"yes"},"error":null}`,
		`{"id":1,"result":"\xff"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseWire(data)
		if caseVariantKey(data) {
			return // encoding/json's struct decoding matches these; go-sdk and parseWire do not (TestParseWireExactNames)
		}
		var ref wireMessage
		if jerr := json.Unmarshal(data, &ref); (err == nil) != (jerr == nil) {
			t.Fatalf("parseWire: %v; encoding/json: %v", err, jerr)
		}
		if err != nil {
			return
		}
		var top map[string]json.RawMessage
		if _, cerr := log.Canonicalize(data); cerr != nil || json.Unmarshal(data, &top) != nil {
			return // read by encoding/json, as before
		}
		if !bytes.Equal(m.ID, top["id"]) || !bytes.Equal(m.Params, top["params"]) || !bytes.Equal(m.Result, top["result"]) {
			t.Fatalf("read id %s params %s result %s; encoding/json: %s %s %s", m.ID, m.Params, m.Result, top["id"], top["params"], top["result"])
		}
		var method string
		if v, ok := top["method"]; ok && json.Unmarshal(v, &method) == nil && m.Method != method {
			t.Fatalf("method %q, want %q", m.Method, method)
		}
		if m.resultCanon != nil {
			want, err := log.Canonicalize(m.Result)
			if err != nil || !bytes.Equal(want, m.resultCanon) {
				t.Fatalf("result canonical %s, Canonicalize %s (%v)", m.resultCanon, want, err)
			}
		}
		var r map[string]json.RawMessage
		if json.Unmarshal(m.Result, &r) == nil {
			if want := string(r["isError"]) == "true"; m.isError != want && m.resultCanon != nil {
				t.Fatalf("isError %v, want %v", m.isError, want)
			}
		}
	})
}

// caseVariantKey reports whether data, a JSON object, has a member whose
// name is one of a JSON-RPC message's in other letter case ("ID",
// "Result"), at the top or in its error object.
func caseVariantKey(data []byte) bool {
	variant := func(raw []byte, names ...string) bool {
		var top map[string]json.RawMessage
		json.Unmarshal(raw, &top)
		for k := range top {
			for _, n := range names {
				if k != n && strings.EqualFold(k, n) {
					return true
				}
			}
		}
		return false
	}
	var top map[string]json.RawMessage
	json.Unmarshal(data, &top)
	return variant(data, "jsonrpc", "id", "method", "params", "result", "error") ||
		variant(top["error"], "code", "message", "data") || variant(top["result"], "isError")
}

// TestParseWireExactNames: a message that is not I-JSON (a number beyond
// a double) is read with its member names matched exactly, as go-sdk's
// jsonrpc and parseWire's walk read them; encoding/json's struct
// decoding took "ID" for "id", "Result" for "result", "IsError" for
// "isError".
func TestParseWireExactNames(t *testing.T) {
	for _, c := range []struct {
		msg               string
		id, result        string
		isError, hasError bool
	}{
		{msg: `{"jsonrpc":"2.0","id":1,"Result":{"n":1e999},"result":{"n":2e999}}`, id: "1", result: `{"n":2e999}`},
		{msg: `{"jsonrpc":"2.0","ID":7,"id":1,"result":{"n":1e999}}`, id: "1", result: `{"n":1e999}`},
		{msg: `{"jsonrpc":"2.0","id":1,"Result":{"n":1e999}}`, id: "1"},
		{msg: `{"jsonrpc":"2.0","id":1,"result":{"n":1e999,"IsError":true}}`, id: "1", result: `{"n":1e999,"IsError":true}`},
		{msg: `{"jsonrpc":"2.0","id":1,"result":{"n":1e999,"isError":true}}`, id: "1", result: `{"n":1e999,"isError":true}`, isError: true},
		{msg: `{"jsonrpc":"2.0","id":1,"Error":{"code":1,"message":"x"},"result":{"n":1e999}}`, id: "1", result: `{"n":1e999}`},
		{msg: `{"jsonrpc":"2.0","id":1,"x":1e999,"error":{"code":-32000,"message":"no"}}`, id: "1", hasError: true},
	} {
		m, err := parseWire([]byte(c.msg))
		if err != nil {
			t.Errorf("%s: %v", c.msg, err)
			continue
		}
		if m.walked {
			t.Fatalf("%s: read in the one pass; the case wants a message that is not I-JSON", c.msg)
		}
		if string(m.ID) != c.id || string(m.Result) != c.result || m.isError != c.isError || (m.Error != nil) != c.hasError {
			t.Errorf("%s: read id %s result %s isError %v error %+v; want id %s result %s isError %v error %v", c.msg, m.ID, m.Result, m.isError, m.Error, c.id, c.result, c.isError, c.hasError)
		}
	}
}

// FuzzAppendJSONString: appendJSONString writes what json.Marshal writes
// for every string, the part it writes itself and the part it leaves to
// json.Marshal alike.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "echo", "a\nb", `q"uote\`, "<&>", "a<b", "x>", "— provlog.test/proxy 8f3c\n", "\u2028", "\xff", "tab\there", "é", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("appendJSONString(%q) = %s, want x%s", s, got, want)
		}
	})
}
