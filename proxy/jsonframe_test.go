package proxy

import (
	"bytes"
	"encoding/json"
	"io"
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
// objects for which want is true, and returns the stream as the SDK saw
// it, the values taken and where in data each began.
func frameEvents(t testing.TB, data []byte, sizes []int, want func(v []byte) bool) (sdk []byte, taken [][]byte, at []int) {
	src := &chunkReader{data: data, sizes: sizes}
	f := newFrameReader(src, nil)
	f.take = func(v []byte) bool {
		if !want(v) {
			return false
		}
		taken = append(taken, bytes.Clone(v))
		// v lies in f.buf, whose first byte is the stream's byte
		// read-n (read: what src gave so far).
		read := len(data) - len(src.data)
		at = append(at, read-f.n+cap(f.buf)-cap(v))
		return true
	}
	buf := make([]byte, 7) // the SDK reads in small pieces too
	for {
		n, err := f.Read(buf)
		sdk = append(sdk, buf[:n]...)
		if err == io.EOF {
			return sdk, taken, at
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFrameReader(t *testing.T) {
	takeMarked := func(v []byte) bool { return bytes.Contains(v, []byte(`"take"`)) }
	for _, tc := range []struct {
		name, in, sdk string
		taken         []string
		// whole: only when the stream arrives in one read. A value that
		// ends a read is taken before its next byte is seen; the SDK's
		// check of that byte is as timing-bound (it checks only what its
		// decoder has buffered).
		whole bool
	}{
		{"one per line", "{\"a\":1}\n{\"take\":2}\n{\"b\":\"}\"}\n", "{\"a\":1}\n{\"b\":\"}\"}\n", []string{`{"take":2}`}, false},
		{"crlf", "{\"take\":1}\r\n{\"a\":2}\r\n", "\n{\"a\":2}\r\n", []string{`{"take":1}`}, false},
		{"escapes and nesting", "{\"take\":\"\\\"}\\\\\",\"x\":[{\"y\":\"]\"}]}\n", "", []string{`{"take":"\"}\\","x":[{"y":"]"}]}`}, false},
		{"not at a line start", "{\"a\":1} {\"take\":2}\n", "{\"a\":1} {\"take\":2}\n", nil, false},
		{"two on a line", "{\"take\":1}{\"take\":2}\n", "{\"take\":1}{\"take\":2}\n", nil, true},
		{"no line end yet", "{\"take\":1}", "", []string{`{"take":1}`}, false},
		{"then not a line end", "{\"a\":0}\n{\"take\":1}{\"take\":2}\n", "{\"a\":0}\n{\"take\":1}{\"take\":2}\n", nil, true},
		{"a batch stays", "[{\"take\":1}]\n{\"take\":2}\n", "[{\"take\":1}]\n", []string{`{"take":2}`}, false},
		{"leading space on its line", "  {\"take\":1}\n", "  ", []string{`{"take":1}`}, false},
		{"a scalar passes all after it", "{\"take\":1}\n7\n{\"take\":2}\n", "7\n{\"take\":2}\n", []string{`{"take":1}`}, false},
		{"a stray bracket", "}\n{\"take\":2}\n", "}\n{\"take\":2}\n", nil, false},
		{"unterminated", "{\"take\":\"abc\n", "{\"take\":\"abc\n", nil, false},
	} {
		for _, sizes := range [][]int{nil, {1}, {3, 1, 5}, {11}} {
			if tc.whole && sizes != nil {
				continue
			}
			sdk, taken, _ := frameEvents(t, []byte(tc.in), sizes, takeMarked)
			if string(sdk) != tc.sdk {
				t.Errorf("%s, reads of %v: the SDK read %q, want %q", tc.name, sizes, sdk, tc.sdk)
			}
			var got []string
			for _, v := range taken {
				got = append(got, string(v))
			}
			if strings.Join(got, "|") != strings.Join(tc.taken, "|") {
				t.Errorf("%s, reads of %v: taken %q, want %q", tc.name, sizes, got, tc.taken)
			}
		}
	}
}

// TestFrameReaderLimit: a value longer than the SDK's limit is passed on
// as it comes, not held.
func TestFrameReaderLimit(t *testing.T) {
	in := "{\"take\":\"" + strings.Repeat("x", maxFrameBytes) + "\"}\n{\"take\":1}\n"
	sdk, taken, _ := frameEvents(t, []byte(in), []int{1 << 20}, func(v []byte) bool { return bytes.Contains(v, []byte(`"take"`)) })
	if string(sdk) != in || len(taken) != 0 {
		t.Errorf("the SDK read %d of %d bytes, %d taken; want all, none taken", len(sdk), len(in), len(taken))
	}
}

// TestFrameReaderAllocs: a long value costs a buffer's growth, not an
// allocation per read.
func TestFrameReaderAllocs(t *testing.T) {
	in := []byte("{\"take\":\"" + strings.Repeat(`ab\"c`, 200<<10) + "\"}\n")
	allocs := testing.AllocsPerRun(3, func() {
		f := newFrameReader(&chunkReader{data: in, sizes: []int{4096}}, func([]byte) bool { return true })
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
// that started a line, with its line end), in order.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":[2,{\"c\":\"}\\\"\"}]}\r\n[1]\n"), []byte{3, 1})
	f.Add([]byte("  {\"x\":\"\\\\\"}\n7\n{}"), []byte{1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		sizes := make([]int, len(cuts))
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		every := func(v []byte) bool { return len(v)%3 != 0 }
		sdk, taken, at := frameEvents(t, data, sizes, every)
		var want []byte
		k := 0
		for i, v := range taken {
			a := at[i]
			if a < k || a+len(v) >= len(data) || !bytes.Equal(data[a:a+len(v)], v) {
				t.Fatalf("took %q at %d, which is not what the stream holds there", v, a)
			}
			if v[0] != '{' || data[a+len(v)] != '\n' && data[a+len(v)] != '\r' {
				t.Fatalf("took %q, which is not an object ending a line", v)
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
			want = append(want, data[k:a]...)
			k = a + len(v) + 1
		}
		want = append(want, data[k:]...)
		if !bytes.Equal(sdk, want) {
			t.Fatalf("the SDK read %q, want %q", sdk, want)
		}
	})
}

// TestFrameReaderGivesUpAtOnce: bytes that are no JSON value reach the
// SDK as soon as they are read, with what came before them, so that it
// refuses them then; before, they waited for the client's next write, and
// a client waiting for an answer waited for ever.
func TestFrameReaderGivesUpAtOnce(t *testing.T) {
	pr, pw := io.Pipe()
	f := newFrameReader(pr, func([]byte) bool { return false })
	go pw.Write([]byte("{\"a\":1}\ngarbage\n")) // the client writes this and waits
	got := make(chan string, 1)
	go func() {
		var sdk []byte
		buf := make([]byte, 64)
		for !bytes.Contains(sdk, []byte("garbage\n")) {
			n, err := f.Read(buf)
			if err != nil {
				break
			}
			sdk = append(sdk, buf[:n]...)
		}
		got <- string(sdk)
	}()
	select {
	case sdk := <-got:
		if sdk != "{\"a\":1}\ngarbage\n" {
			t.Errorf("the SDK read %q", sdk)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bytes after giving up did not reach the SDK without another write")
	}
	pw.Close()
}
