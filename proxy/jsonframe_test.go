package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// chunkReader returns its data a few bytes at a time, as a pipe may.
type chunkReader struct {
	data  []byte
	sizes []int // read sizes, cycled; 0 or none means all at once
	i     int
}

func (c *chunkReader) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		if s := c.sizes[c.i%len(c.sizes)]; s > 0 {
			n = s
		}
		c.i++
	}
	n = min(n, len(b), len(c.data))
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

// frameEvents reads data through a frameReader whose take takes the
// objects for which want is true and whose refuse refuses what is not
// JSON and what is marked "refuse", and returns the stream as the SDK saw
// it, the values taken and where in data each began, and likewise what
// was refused and where. A value taken where a read ended has its place
// in at negated, less one.
func frameEvents(t testing.TB, data []byte, sizes []int, want func(v []byte) bool) (sdk []byte, taken [][]byte, at []int, refused [][]byte, rat []int) {
	src := &chunkReader{data: data, sizes: sizes}
	f := newFrameReader(src, nil, nil)
	// v lies in f.buf, whose first byte is the stream's byte read-n (read:
	// what src gave so far).
	where := func(v []byte) int { return len(data) - len(src.data) - f.n + cap(f.buf) - cap(v) }
	f.take = func(v []byte) bool {
		if !want(v) {
			return false
		}
		taken = append(taken, bytes.Clone(v))
		a := where(v)
		if a+len(v) == len(data)-len(src.data) {
			a = -a - 1
		}
		at = append(at, a)
		return true
	}
	f.refuse = func(v []byte) bool {
		if json.Valid(v) && (v[0] == '{' || v[0] == '[') && !bytes.Contains(v, []byte(`"refuse"`)) {
			return false
		}
		refused = append(refused, bytes.Clone(v))
		rat = append(rat, where(v))
		return true
	}
	buf := make([]byte, 7) // the SDK reads in small pieces too
	for {
		n, err := f.Read(buf)
		sdk = append(sdk, buf[:n]...)
		if err == io.EOF {
			return sdk, taken, at, refused, rat
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFrameReader(t *testing.T) {
	takeMarked := func(v []byte) bool { return bytes.Contains(v, []byte(`"take"`)) }
	for _, tc := range []struct {
		name, in, sdk  string
		taken, refused []string
		// whole: only when the stream arrives in one read. A value that
		// ends a read is taken before its next byte is seen; the SDK's
		// check of that byte is as timing-bound (it checks only what its
		// decoder has buffered).
		whole bool
	}{
		{"one per line", "{\"a\":1}\n{\"take\":2}\n{\"b\":\"}\"}\n", "{\"a\":1}\n{\"b\":\"}\"}\n", []string{`{"take":2}`}, nil, false},
		{"crlf", "{\"take\":1}\r\n{\"a\":2}\r\n", "\n{\"a\":2}\r\n", []string{`{"take":1}`}, nil, false},
		{"escapes and nesting", "{\"take\":\"\\\"}\\\\\",\"x\":[{\"y\":\"]\"}]}\n", "", []string{`{"take":"\"}\\","x":[{"y":"]"}]}`}, nil, false},
		{"not at a line start", "{\"a\":1} {\"take\":2}\n", "{\"a\":1} {\"take\":2}\n", nil, nil, false},
		{"two on a line", "{\"take\":1}{\"take\":2}\n", "{\"take\":1}{\"take\":2}\n", nil, nil, true},
		{"no line end yet", "{\"take\":1}", "", []string{`{"take":1}`}, nil, false},
		{"then not a line end", "{\"a\":0}\n{\"take\":1}{\"take\":2}\n", "{\"a\":0}\n{\"take\":1}{\"take\":2}\n", nil, nil, true},
		{"a batch stays", "[{\"take\":1}]\n{\"take\":2}\n", "[{\"take\":1}]\n", []string{`{"take":2}`}, nil, false},
		{"leading space on its line", "  {\"take\":1}\n", "  ", []string{`{"take":1}`}, nil, false},
		{"a scalar is refused, to its line end", "{\"take\":1}\n7 8\n{\"take\":2}\n", "\n", []string{`{"take":1}`, `{"take":2}`}, []string{"7 8"}, false},
		{"a stray bracket", "}\n{\"take\":2}\n", "\n", []string{`{"take":2}`}, []string{"}"}, false},
		{"not JSON", "garbage {\n{\"take\":2}\r\n", "\n\n", []string{`{"take":2}`}, []string{"garbage {"}, false},
		{"unterminated string", "{\"take\":\"abc\n{\"take\":2}\n", "\n", []string{`{"take":2}`}, []string{`{"take":"abc`}, false},
		{"an escaped line end", "{\"take\":\"\\\n{\"take\":2}\n", "\n", []string{`{"take":2}`}, []string{`{"take":"\`}, false},
		{"cut short", "{\"a\":[1,2\n{\"take\":2}\n", "\n", []string{`{"take":2}`}, []string{`{"a":[1,2`}, false},
		{"spread over lines", "{\"a\":\n1}\n", "\n\n", nil, []string{`{"a":`, "1}"}, false},
		{"a value that is not JSON", "{\"a\":}\n{\"take\":2}\n", "\n", []string{`{"take":2}`}, []string{`{"a":}`}, false},
		{"a value refused", " {\"refuse\":1}\n[1]\n", " \n[1]\n", nil, []string{`{"refuse":1}`}, false},
		{"what follows a value on its line", "{\"a\":1} x\n", "{\"a\":1} \n", nil, []string{"x"}, false},
	} {
		for _, sizes := range [][]int{nil, {1}, {3, 1, 5}, {11}} {
			if tc.whole && sizes != nil {
				continue
			}
			sdk, taken, _, refused, _ := frameEvents(t, []byte(tc.in), sizes, takeMarked)
			if string(sdk) != tc.sdk {
				t.Errorf("%s, reads of %v: the SDK read %q, want %q", tc.name, sizes, sdk, tc.sdk)
			}
			if got := strings.Join(asStrings(taken), "|"); got != strings.Join(tc.taken, "|") {
				t.Errorf("%s, reads of %v: taken %q, want %q", tc.name, sizes, got, tc.taken)
			}
			if got := strings.Join(asStrings(refused), "|"); got != strings.Join(tc.refused, "|") {
				t.Errorf("%s, reads of %v: refused %q, want %q", tc.name, sizes, got, tc.refused)
			}
		}
	}
}

func asStrings(bs [][]byte) []string {
	var s []string
	for _, b := range bs {
		s = append(s, string(b))
	}
	return s
}

// TestFrameReaderLimit: a value longer than the SDK's limit, and a line
// that long which is no value, are dropped to their line end, each
// answered once with its length, wherever the reads break; what follows
// is read as before. The value used to go to the SDK, which ended the
// session.
func TestFrameReaderLimit(t *testing.T) {
	long := "{\"take\":\"" + strings.Repeat("x", maxFrameBytes) + "\"}"
	junk := strings.Repeat("y", maxFrameBytes+5)
	in := " " + long + "\n{\"take\":1}\n" + junk + "\n[1]\n" + junk
	for _, sizes := range [][]int{{1 << 20}, {frameReadSize, 7}} {
		var taken []string
		var dropped []int
		f := newFrameReader(&chunkReader{data: []byte(in), sizes: sizes}, func(v []byte) bool {
			taken = append(taken, string(v))
			return v[0] == '{' && len(v) < 100
		}, func([]byte) bool { return false })
		f.tooLong = func(n int) { dropped = append(dropped, n) }
		sdk, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		want := []int{len(long), len(junk), len(junk)}
		if string(sdk) != " \n\n[1]\n" || !slices.Equal(taken, []string{`{"take":1}`}) || !slices.Equal(dropped, want) {
			t.Errorf("reads of %v: the SDK read %q, taken %q, dropped %v; want %v", sizes, sdk, taken, dropped, want)
		}
	}
}

// TestFrameReaderAllocs: a long value costs a buffer's growth, not an
// allocation per read.
func TestFrameReaderAllocs(t *testing.T) {
	in := []byte("{\"take\":\"" + strings.Repeat(`ab\"c`, 200<<10) + "\"}\n")
	allocs := testing.AllocsPerRun(3, func() {
		f := newFrameReader(&chunkReader{data: in, sizes: []int{4096}}, func([]byte) bool { return true }, nil)
		if _, err := io.Copy(io.Discard, f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 20 {
		t.Errorf("%.0f allocations to read a %d-byte value, want at most 20", allocs, len(in))
	}
}

// FuzzFrameReader: whatever the stream and however it is cut into reads,
// the SDK reads exactly the stream less the values taken (each an object
// that started a line, with its line end) and less what was refused (the
// rest of a line, or a value), in order; and, of a stream whose last line
// ended, the SDK reads only JSON values, so that it never ends the
// session.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":[2,{\"c\":\"}\\\"\"}]}\r\n[1]\n"), []byte{3, 1})
	f.Add([]byte("  {\"x\":\"\\\\\"}\n7\n{}"), []byte{1})
	f.Add([]byte("{\"a\":[1,\n{\"b\":}\n  x {\"c\":1}\n{\"d\":\"\\\n"), []byte{2, 5})
	f.Add([]byte("{\"\"}00"), []byte{1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		every := func(v []byte) bool { return len(v)%3 != 0 }
		sdk, taken, at, refused, rat := frameEvents(t, data, sizes, every)
		type event struct {
			at, skip int
			v        []byte
		}
		var events []event
		for i, v := range taken {
			a, endedRead := at[i], at[i] < 0
			if endedRead {
				a = -a - 1
			}
			skip := len(v) + 1 // its line end is its own
			if lineEnd := a+len(v) < len(data) && (data[a+len(v)] == '\n' || data[a+len(v)] == '\r'); !lineEnd {
				// Taken before the byte after it was read.
				skip = len(v)
				if !endedRead {
					t.Fatalf("took %q at %d, which is not an object ending a line or a read", v, a)
				}
			}
			if v[0] != '{' {
				t.Fatalf("took %q at %d, which is not an object", v, a)
			}
			if a > 0 && data[a-1] != '\n' && data[a-1] != '\r' && data[a-1] != ' ' && data[a-1] != '\t' {
				t.Fatalf("took %q, which follows %q", v, data[a-1])
			}
			if json.Valid(v) {
				// A value taken is the value a decoder reads there.
				var raw json.RawMessage
				if err := json.NewDecoder(bytes.NewReader(data[a:])).Decode(&raw); err != nil || !bytes.Equal(raw, v) {
					t.Fatalf("took %q where a decoder reads %q (%v)", v, raw, err)
				}
			}
			events = append(events, event{a, skip, v})
		}
		for i, v := range refused {
			a := rat[i]
			lineEnd := a+len(v) < len(data) && (data[a+len(v)] == '\n' || data[a+len(v)] == '\r')
			value := (v[0] == '{' || v[0] == '[') && (v[len(v)-1] == '}' || v[len(v)-1] == ']')
			if bytes.ContainsAny(v, "\r\n") || v[0] == ' ' || v[0] == '\t' || !lineEnd && !value {
				t.Fatalf("refused %q at %d, which is neither the rest of a line nor a value", v, a)
			}
			events = append(events, event{a, len(v), v})
		}
		slices.SortFunc(events, func(x, y event) int { return x.at - y.at })
		var want []byte
		k := 0
		for _, e := range events {
			if e.at < k || !bytes.Equal(data[e.at:e.at+len(e.v)], e.v) {
				t.Fatalf("took or refused %q at %d, which is not what the stream holds there", e.v, e.at)
			}
			want = append(want, data[k:e.at]...)
			k = e.at + e.skip
		}
		want = append(want, data[k:]...)
		if !bytes.Equal(sdk, want) {
			t.Fatalf("the SDK read %q, want %q", sdk, want)
		}
		if len(data) > 0 && (data[len(data)-1] == '\n' || data[len(data)-1] == '\r') {
			dec := json.NewDecoder(bytes.NewReader(sdk))
			for {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("the SDK read %q, which is not all JSON values: %v", sdk, err)
				}
			}
		}
	})
}

// TestFrameReaderRefusesAtOnce: a line that is no JSON value is refused
// as soon as its line end is read, and the SDK reads what came before it;
// a client that writes such a line and waits for the answer does not wait
// for ever.
func TestFrameReaderRefusesAtOnce(t *testing.T) {
	pr, pw := io.Pipe()
	refused := make(chan string, 1)
	f := newFrameReader(pr, func([]byte) bool { return false }, func(v []byte) bool {
		if json.Valid(v) {
			return false
		}
		refused <- string(v)
		return true
	})
	go pw.Write([]byte("{\"a\":1}\ngarbage\n")) // the client writes this and waits
	read := make(chan string, 1)
	go func() {
		var sdk []byte
		buf := make([]byte, 64)
		for !bytes.Contains(sdk, []byte("}\n")) {
			n, err := f.Read(buf)
			if err != nil {
				break
			}
			sdk = append(sdk, buf[:n]...)
		}
		read <- string(sdk)
		io.Copy(io.Discard, f)
	}()
	var sdk, bad string
	for sdk == "" || bad == "" {
		select {
		case sdk = <-read:
		case bad = <-refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("the SDK read %q and %q was refused, without another write", sdk, bad)
		}
	}
	if sdk != "{\"a\":1}\n" || bad != "garbage" {
		t.Errorf("the SDK read %q and %q was refused, want {\"a\":1}\\n and garbage", sdk, bad)
	}
	pw.Close()
}
