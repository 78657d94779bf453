package proxy

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestWithoutResultType: an older client's result from a 2026-07-28
// session loses its top-level resultType and nothing else: the rest of
// the result is the bytes it was, spacing, member order and escapes as
// the server wrote them. It was decoded and encoded again whenever
// "resultType" stood anywhere in it, a text quoting it included.
func TestWithoutResultType(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content":[{"type":"text","text":"<b>"}],"resultType":"complete"}`, `{"content":[{"type":"text","text":"<b>"}]}`},
		{`{"resultType":"complete", "z":1,"a":2}`, `{ "z":1,"a":2}`},
		{`{ "z" : 1 , "resultType" : {"x":[1,"]"]} , "a" : 2 }`, `{ "z" : 1 ,  "a" : 2 }`},
		{`{"resultType":"complete"}`, `{}`},
		{`{"a":1,"result\u0054ype":true}`, `{"a":1}`},
		{`{"content":[{"type":"text","text":"say \"resultType\": <x>"}]}`, `{"content":[{"type":"text","text":"say \"resultType\": <x>"}]}`},
		{`{"_meta":{"resultType":1},"b":null}`, `{"_meta":{"resultType":1},"b":null}`},
		{`{"resultType":1,"resultType":2,"b":3}`, `{"b":3}`},
	} {
		if got := string(withoutResultType(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzWithoutTop: for any JSON object, withoutResultType's result is a
// JSON object holding what the input held but resultType; one without a
// top-level resultType is returned as it is.
func FuzzWithoutTop(f *testing.F) {
	f.Add([]byte(`{"a":1,"resultType":"x"}`))
	f.Add([]byte(`{"resultType" : [1,{"b":"}"}] ,"c":"\"resultType\""}`))
	f.Add([]byte(`{"resultType":-1.5e3}`))
	f.Add([]byte(`{"result\u0054ype":true,"resultType":false}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var before map[string]any
		if json.Unmarshal(in, &before) != nil || before == nil || !json.Valid(in) {
			return
		}
		out := withoutResultType(in)
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil || after == nil {
			t.Fatalf("%s became %s: %v", in, out, err)
		}
		_, had := before["resultType"]
		delete(before, "resultType")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("%s became %s", in, out)
		}
		if !had && string(out) != string(in) {
			t.Fatalf("%s, with no resultType, became %s", in, out)
		}
	})
}
