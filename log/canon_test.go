package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// sameMarshal checks that Marshal and the encode-then-canonicalize round
// trip agree on e: the same bytes, or both an error.
func sameMarshal(t *testing.T, name string, e *Entry) {
	t.Helper()
	fast, ferr := e.Marshal()
	slow, serr := e.marshalRoundTrip()
	switch {
	case (ferr == nil) != (serr == nil):
		t.Errorf("%s: Marshal error %v, round trip error %v", name, ferr, serr)
	case ferr == nil && !bytes.Equal(fast, slow):
		t.Errorf("%s:\nMarshal    %s\nround trip %s", name, fast, slow)
	case ferr == nil && !isCanonical(fast):
		t.Errorf("%s: Marshal output is not canonical: %s", name, fast)
	}
}

func nest(depth int, leaf any) any {
	v := leaf
	for i := range depth {
		if i%2 == 0 {
			v = []any{v}
		} else {
			v = map[string]any{"k": v}
		}
	}
	return v
}

func TestMarshalMatchesRoundTrip(t *testing.T) {
	type point struct {
		X, Y int
		Name string `json:"name,omitempty"`
	}
	ts := time.Date(2026, 11, 30, 10, 0, 0, 123, time.FixedZone("x", 3600))
	cases := map[string]any{
		"string":             "hello",
		"escapes":            "q\"b\\s\b\f\n\r\t\x00\x1f\x7f <>&",
		"line separators":    "a\u2028b\u2029c",
		"non-ascii":          "é€😀\uffff\ue000",
		"invalid utf8":       "a\xffb\xc3(c\xed\xa0\x80",
		"empty":              "",
		"true":               true,
		"false":              false,
		"nil":                nil,
		"int":                42,
		"negative int":       -7,
		"int64 big":          int64(9007199254740993),
		"int64 min":          int64(math.MinInt64),
		"uint64 max":         uint64(math.MaxUint64),
		"int32":              int32(-5),
		"uint32":             uint32(5),
		"uint":               uint(5),
		"int8 (fallback)":    int8(-3),
		"float":              1.5,
		"float tiny":         5e-324,
		"float 1e21":         1e21,
		"float 1e20":         1e20,
		"float 1e-7":         1e-7,
		"negative zero":      math.Copysign(0, -1),
		"NaN":                math.NaN(),
		"Inf":                math.Inf(1),
		"float32":            float32(0.1),
		"number":             json.Number("1.0"),
		"number exp":         json.Number("-12.5E+3"),
		"number empty":       json.Number(""),
		"number bad":         json.Number("01"),
		"number words":       json.Number("one"),
		"number huge":        json.Number("1e400"),
		"number tiny":        json.Number("1e-400"),
		"raw":                json.RawMessage(` {"b":1, "a":[1.0,"x",null]} `),
		"raw nil":            json.RawMessage(nil),
		"raw empty":          json.RawMessage{},
		"raw bad":            json.RawMessage(`{"a":}`),
		"raw dup":            json.RawMessage(`{"a":1,"a":2}`),
		"raw two values":     json.RawMessage(`1 2`),
		"raw lone surrogate": json.RawMessage(`"\ud800"`),
		"bytes":              []byte("\x00\xffbinary"),
		"struct":             point{1, 2, "p"},
		"pointer":            &point{X: 3},
		"time":               ts,
		"map":                map[string]any{"b": 1, "a": "x", "é": true, "😀": nil, "\ue000": 2},
		"map nil":            map[string]any(nil),
		"map empty":          map[string]any{},
		"map of strings":     map[string]string{"z": "1", "a": "2"},
		"map of strings nil": map[string]string(nil),
		"map bad key":        map[string]any{"a\xff": 1, "b": 2},
		"map keys collide":   map[string]any{"a\xff": 1, "a\xfe": 2},
		"map int values":     map[string]int{"b": 2, "a": 1},
		"slice":              []any{1, "two", 3.5, nil, []any{}, map[string]any{}},
		"slice nil":          []any(nil),
		"strings":            []string{"b", "a\n"},
		"strings nil":        []string(nil),
		"depth 99":           nest(99, "x"),
		"depth 100":          nest(100, "x"),
		"depth 101":          nest(101, "x"),
		"raw at depth 99":    nest(99, json.RawMessage(`[1]`)),
		"raw at depth 98":    nest(98, json.RawMessage(`[1]`)),
		"channel":            make(chan int),
		"canonical":          CanonicalJSON(`{"a":[1,"x"],"b":null}`),
		"canonical nil":      CanonicalJSON(nil),
	}
	for name, v := range cases {
		sameMarshal(t, name, &Entry{Kind: "call", Time: ts, Actor: "alice", Fields: map[string]any{"value": v, "other": "x"}})
	}
	// The common fields and their odd values.
	sameMarshal(t, "actor", &Entry{Kind: "k\xff\"", Time: ts, Actor: "a\x00é"})
	sameMarshal(t, "field names", &Entry{Kind: "call", Time: ts, Fields: map[string]any{"\ue000": 1, "😀": 2, "a": 3, "Z": 4, "": 5}})
	sameMarshal(t, "bad field name", &Entry{Kind: "call", Time: ts, Fields: map[string]any{"a\xff": 1}})
	sameMarshal(t, "year 10000", &Entry{Kind: "call", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	sameMarshal(t, "too large", &Entry{Kind: "call", Time: ts, Fields: map[string]any{"x": strings.Repeat("a", MaxEntrySize)}})
	if _, err := (&Entry{Time: ts}).Marshal(); err == nil {
		t.Error("an entry without a kind was marshalled")
	}
	if _, err := (&Entry{Kind: "call", Fields: map[string]any{"time": 1}}).Marshal(); err == nil {
		t.Error("a field named like a common field was marshalled")
	}
}

// FuzzMarshal holds Marshal to the round trip for fields decoded from
// arbitrary JSON, and for arbitrary bytes as strings, names and raw JSON.
func FuzzMarshal(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[true,null,"x"],"c":{"é":1.50}}`), "s")
	f.Add([]byte(`[1e21, -0, 0.1, 123456789012345678901234567890]`), "\xff")
	f.Add([]byte(`"\u2028\ud83d\ude00"`), "\u2028")
	f.Add([]byte(`{"\ue000":1,"\ud83d\ude00":2}`), "")
	f.Fuzz(func(t *testing.T, data []byte, s string) {
		ts := time.Unix(0, 1)
		var decoded any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		fields := map[string]any{
			"raw":    json.RawMessage(data),
			"string": string(data),
			s:        s,
			"list":   []any{s, json.Number(s)},
		}
		if dec.Decode(&decoded) == nil {
			fields["decoded"] = decoded
		}
		if _, ok := reserved[s]; ok {
			delete(fields, s)
		}
		sameMarshal(t, "fuzz", &Entry{Kind: "call", Time: ts, Actor: s, Fields: fields})
	})
}

// callEntry is an entry like the proxy's: a tool call's fields.
func callEntry() *Entry {
	return &Entry{Kind: KindCall, Time: time.Now(), Actor: "alice", Fields: map[string]any{
		"server": "everything", "tool": "echo",
		"args":             map[string]any{"message": "hello world", "count": json.Number("3"), "flags": []any{true, "x"}},
		"is_error":         false,
		"started":          time.Now().UTC().Format(TimeFormat),
		"duration_ns":      int64(1234567),
		"result_sha256":    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"result_bytes":     57,
		"client":           map[string]any{"name": "claude-code", "version": "2.0.1"},
		"protocol_version": "2025-11-25",
	}}
}

func BenchmarkEntryMarshal(b *testing.B) {
	e := callEntry()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("round-trip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.marshalRoundTrip(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// walkCanonical rebuilds data's canonical form from WalkObject's members.
func walkCanonical(data []byte) ([]byte, error) {
	type member struct{ key, canon string }
	var ms []member
	err := WalkObject(data, func(key string, raw, canon []byte) error {
		if !isCanonical(canon) {
			return fmt.Errorf("member %q: %q is not canonical", key, canon)
		}
		c, err := Canonicalize(raw)
		if err != nil || !bytes.Equal(c, canon) {
			return fmt.Errorf("member %q: raw %q canonicalizes to %q (%v), not %q", key, raw, c, err, canon)
		}
		ms = append(ms, member{key, string(canon)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
	out := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJCSString(out, m.key)
		out = append(out, ':')
		out = append(out, m.canon...)
	}
	return append(out, '}'), nil
}

func TestWalkObject(t *testing.T) {
	for _, in := range []string{
		` {"b": [1.0, {"z":1,"a":2}], "a": "x\u00e9", "c": {}} `,
		`{}`, `{"a":1}`, `{"a":1,"a":2}`, `[1]`, `"x"`, `{"a":1} x`, `{"a":}`, `{"a":1,}`,
		`{"a":"\ud800"}`, `{"a":1e999}`, "{\"a\":\"\xff\"}", `{"a"`, ``,
	} {
		got, gerr := walkCanonical([]byte(in))
		want, werr := Canonicalize([]byte(in))
		isObject := werr == nil && want[0] == '{'
		switch {
		case isObject && (gerr != nil || !bytes.Equal(got, want)):
			t.Errorf("%q: walked %q %v, want %q", in, got, gerr, want)
		case !isObject && gerr == nil:
			t.Errorf("%q: walked %q, want an error (%v)", in, got, werr)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := WalkObject([]byte(`{"a":1,"b":2}`), func(string, []byte, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("fn's error: %v after %d members", err, n)
	}
}

// TestWalkObjectIn: the members of a value walked in the same pass are
// those WalkObject finds in it on its own, and the walk as a whole
// accepts, and yields, what WalkObject does.
func TestWalkObjectIn(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"params":{"name":"t","arguments":{"z":[1.0,{"b":1,"a":2}],"a":"\u00e9"},"_meta":{}}}`,
		` { "p" : { } , "q" : 1 } `, `{"q":{"a":1},"p":{"b":2,"a":1}}`, `{"p":[1]}`, `{"p":"x"}`,
		`{"p":{"a":1,"a":2}}`, `{"p":{"a":1e999}}`, `{"p":{"a":1},"p":{}}`, `{"p":{"a":}}`, `{"p":{"a":1}} x`, `{"p":{"a":1}`,
	} {
		type member struct{ key, raw, canon string }
		var inner, alone []member
		var outer, plain []string
		walk := func(ms *[]member) func(string, []byte, []byte) error {
			return func(k string, raw, canon []byte) error {
				*ms = append(*ms, member{k, string(raw), string(canon)})
				return nil
			}
		}
		err := WalkObjectIn([]byte(in), func(k string, raw, canon []byte) error {
			outer = append(outer, k+"="+string(canon))
			if k == "p" {
				WalkObject(raw, walk(&alone))
			}
			return nil
		}, func(k string) func(string, []byte, []byte) error {
			if k == "p" {
				return walk(&inner)
			}
			return nil
		})
		perr := WalkObject([]byte(in), func(k string, raw, canon []byte) error {
			plain = append(plain, k+"="+string(canon))
			return nil
		})
		switch {
		case (err == nil) != (perr == nil):
			t.Errorf("%q: WalkObjectIn %v, WalkObject %v", in, err, perr)
		case err == nil && !slices.Equal(outer, plain):
			t.Errorf("%q: members %q, WalkObject's %q", in, outer, plain)
		case err == nil && !slices.Equal(inner, alone):
			t.Errorf("%q: p's members %q, on their own %q", in, inner, alone)
		}
	}
}

// FuzzWalkObject holds WalkObject to Canonicalize: it accepts exactly the
// objects Canonicalize accepts, and its members make up the same form.
func FuzzWalkObject(f *testing.F) {
	f.Add([]byte(`{"b":[1.0,{"z":1,"a":2}],"a":"x"}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(` {"\ue000":1, "\ud83d\ude00":2} `))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := walkCanonical(data)
		want, werr := Canonicalize(data)
		isObject := werr == nil && want[0] == '{'
		switch {
		case isObject && (gerr != nil || !bytes.Equal(got, want)):
			t.Fatalf("walked %q %v, want %q", got, gerr, want)
		case !isObject && gerr == nil:
			t.Fatalf("walked %q, want an error (%v)", got, werr)
		}
		// The work of finding duplicate keys stays linear in the input
		// (TestDuplicateChecksLinear has the numbers of the quadratic one).
		wp, cp := &jcsParser{in: data}, &jcsParser{in: data}
		walkObject(wp, func(string, []byte, []byte) error { return nil }, nil)
		cp.value(0)
		if wp.probes > len(data)+64 || cp.probes > len(data)+64 {
			t.Fatalf("%d and %d key probes for %d bytes", wp.probes, cp.probes, len(data))
		}
	})
}

// TestWalkObjectReuse: walks reuse their parsers' buffers (walkParsers);
// a walk after one that failed half way, after one stopped by fn, and
// after one too big for its buffers to be kept, is as a first walk.
func TestWalkObjectReuse(t *testing.T) {
	small := []byte(`{"z":{"y":1,"x":[2,{"b":1,"a":0}]},"a":"\u00e9"}`)
	want, err := walkCanonical(small)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	big := manyKeys(maxPooledMembers * 2)
	for _, before := range []func(){
		func() {
			WalkObject([]byte(`{"q":{"b":[1,2],"a":{"d":1,"c":2,"c":3}}}`), func(string, []byte, []byte) error { return nil })
		},
		func() {
			WalkObjectIn([]byte(`{"q":{"b":[1,2],"a":{"d":1,"c":2}}}`), func(string, []byte, []byte) error { return nil },
				func(string) func(string, []byte, []byte) error {
					return func(string, []byte, []byte) error { return stop }
				})
		},
		func() { WalkObject(big, func(string, []byte, []byte) error { return nil }) },
		func() {
			WalkObject([]byte(`{"a":"`+strings.Repeat("x", maxPooledBytes)+`"}`), func(string, []byte, []byte) error { return nil })
		},
	} {
		for range 3 {
			before()
			if got, err := walkCanonical(small); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("walked %s (%v), want %s", got, err, want)
			}
		}
	}
}
