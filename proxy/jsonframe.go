package proxy

import (
	"bytes"
	"io"
)

// Framing of a stdio connection's stream.
//
// An MCP stdio peer writes one JSON-RPC message (or batch) per line, and
// a message "MUST NOT contain embedded newlines" (MCP, Transports,
// stdio); the SDK's connection reads the stream as JSON values one after
// another, whatever white space lies between them, and ends the session
// at the first thing that is not a JSON-RPC message. A frameReader stands
// between a pipe and the SDK's connection: it finds each top-level value,
// offers it to take (which serves it itself, or not), and hands the SDK
// everything it did not take, byte for byte. The pipe front takes plain
// tools/calls (stdiofront.go). What it takes is only what the SDK would
// have read the same way: an object that starts a line and ends one, or
// ends what was read so far (the SDK refuses a value followed by anything
// but a line end, and so still sees those), at most [maxFrameBytes] long.
//
// What the SDK would end the session for, the frameReader offers to
// refuse instead, which answers it (as the TypeScript and Python SDKs
// do, which read a line at a time) and keeps it from the SDK: a line, from
// its first byte that is not white space to its end, that does not begin
// a value (a scalar, a stray bracket, anything that is not JSON) or in
// which a value does not end (the line end is inside it: a value cut
// short, or one spread over lines); and a value, once it ends, that
// refuse finds is not JSON or not a JSON-RPC message. A value over the
// limit, or a line over it that does not begin one, is dropped to its line
// end and answered by tooLong: the SDK ended the session at it, which on
// stdio ended the sidecar, without a word to the client. Each byte is
// scanned once, and the stream is held only a line at a time (at most
// the limit of it).

// maxFrameBytes is the longest value a frameReader holds to offer it: the
// SDK's own limit for one message on a stdio connection.
const maxFrameBytes = 16 << 20

// frameReadSize is how much a frameReader reads from its pipe at a time.
const frameReadSize = 32 << 10

// A valueScanner follows the nesting of a JSON text, byte by byte, far
// enough to tell where each top-level object or array ends, and how deep
// it nests; it does not check that the text is valid JSON (the value's
// reader does).
type valueScanner struct {
	depth int
	inStr bool
	esc   bool
	// spans says a value may span lines (a server's, which go-sdk reads
	// so), not only a client's line.
	spans bool
	max   int // the deepest nesting so far
}

// scan reads p, which continues the bytes scanned before, from the first
// byte of a value (a '{' or '['), and returns the index in p just past
// the byte that closes that value, or -1 if it does not close in p. If a
// line end comes first, in a string or not, it returns that line end's
// index and true instead: the value does not end on its line (unless
// spans is set).
func (s *valueScanner) scan(p []byte) (int, bool) {
	stops := "\"\\\n\r"
	if s.spans {
		stops = "\"\\"
	}
	for i := 0; i < len(p); i++ {
		if s.inStr {
			if s.esc {
				s.esc = false // p[i] is the escaped byte
				if (p[i] == '\n' || p[i] == '\r') && !s.spans {
					return i, true
				}
				continue
			}
			// Skip to the next quote, backslash or line end at once:
			// strings are most of a message's bytes.
			j := bytes.IndexAny(p[i:], stops)
			if j < 0 {
				return -1, false
			}
			i += j
			switch p[i] {
			case '\\':
				s.esc = true
			case '"':
				s.inStr = false
			default:
				return i, true
			}
			continue
		}
		switch p[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
			s.max = max(s.max, s.depth)
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1, false
			}
		case '\n', '\r':
			if !s.spans {
				return i, true
			}
		}
	}
	return -1, false
}

// A frameReader is the SDK's view of a pipe, less the values take served
// and what refuse answered.
type frameReader struct {
	r    io.ReadCloser
	take func(v []byte) bool // v is valid only during the call
	// refuse answers v, a value that ended or the rest of a line, if it is
	// no JSON-RPC message the SDK can read, and reports whether it did. A
	// line is the SDK's neither way; a value it did not answer is.
	refuse func(v []byte) bool
	// tooLong answers a line of n bytes dropped for its length, if set.
	tooLong func(n int)

	window
	bad int // where a line to refuse begins, or -1
	sc  valueScanner
	// lineStart says that the next value would start a line: nothing was
	// read yet, or the first byte after the last value was a line end.
	lineStart bool
	ended     bool // the last value ended at pos, and pos is not yet read
	took      bool // and it was taken: a line end at pos is its own
	dropping  bool // a line too long to hold is dropped up to its end
	dropped   int  // how many of its bytes so far
}

func newFrameReader(r io.ReadCloser, take, refuse func(v []byte) bool) *frameReader {
	return &frameReader{r: r, take: take, refuse: refuse, window: window{val: -1}, bad: -1, lineStart: true}
}

func (f *frameReader) Close() error { return f.r.Close() }

func (f *frameReader) Read(b []byte) (int, error) {
	for {
		if len(f.out) > 0 {
			n := copy(b, f.out)
			f.out = f.out[n:]
			return n, nil
		}
		if f.start < f.n && (f.passing || f.err != nil) {
			f.out, f.start = f.buf[f.start:f.n], f.n
			continue
		}
		if f.err != nil {
			if f.dropping {
				f.endDrop() // the stream ended inside the long line
			}
			return 0, f.err
		}
		if f.passing {
			return f.r.Read(b)
		}
		if f.frame() || f.passing {
			continue // what frame held back, if it gave up, goes first
		}
		if f.n-f.start >= maxFrameBytes {
			f.drop()
			continue
		}
		if shift := f.fill(f.r); f.bad >= 0 {
			f.bad -= shift
		}
	}
}

// frame scans what is buffered and reports whether it made bytes ready
// for the SDK (in out), gave a value to take or a line to refuse.
func (f *frameReader) frame() bool {
	for f.pos < f.n {
		if f.dropping {
			i := bytes.IndexAny(f.buf[f.pos:f.n], "\n\r")
			if i < 0 {
				f.dropped += f.n - f.pos
				f.start, f.pos = f.n, f.n
				return false
			}
			f.dropped += i
			f.start, f.pos = f.pos+i, f.pos+i
			f.endDrop()
			return true
		}
		if f.bad >= 0 {
			i := bytes.IndexAny(f.buf[f.pos:f.n], "\n\r")
			if i < 0 {
				f.pos = f.n
				return false
			}
			return f.refuseLine(f.pos + i)
		}
		if f.val < 0 {
			c := f.buf[f.pos]
			nl := c == '\n' || c == '\r'
			if f.ended {
				f.ended = false
				f.lineStart = nl
				if f.took && nl {
					// The line end of a value taken before it arrived.
					f.took = false
					f.pos++
					f.start = f.pos
					continue
				}
				f.took = false
			}
			switch c {
			case ' ', '\t', '\n', '\r':
				f.pos++ // white space before a value goes to the SDK with it
				continue
			case '{', '[':
				f.val = f.pos
			default:
				f.bad = f.pos // not a value the SDK can read either
				continue
			}
		}
		end, lineEnd := f.sc.scan(f.buf[f.pos:f.n])
		if lineEnd {
			f.bad, f.val, f.sc = f.val, -1, valueScanner{}
			return f.refuseLine(f.pos + end)
		}
		if end < 0 {
			f.pos = f.n
			return false
		}
		end += f.pos
		v := f.buf[f.val:end]
		f.val = -1
		// Taken only if it starts a line and ends one (or ends what was
		// read: its line end may come with the next read).
		atEnd := end == f.n
		if f.lineStart && v[0] == '{' && (atEnd || f.buf[end] == '\n' || f.buf[end] == '\r') && f.take(v) {
			f.out = f.buf[f.start : end-len(v)]
			if atEnd {
				f.start, f.pos = end, end
				f.ended, f.took = true, true
			} else {
				f.start, f.pos = end+1, end+1
				f.lineStart = true
			}
			return true
		}
		f.out = f.buf[f.start:end]
		if f.refuse(v) {
			f.out = f.buf[f.start : end-len(v)]
		}
		f.start, f.pos = end, end
		f.ended = true
		return true
	}
	return false
}

// drop begins dropping the value or line being scanned, which fills the
// limit: what came before it goes to the SDK, and it is dropped to its
// line end. Only white space held that long goes to the SDK as it is.
func (f *frameReader) drop() {
	from := f.val
	if f.bad >= 0 {
		from = f.bad
	}
	if from < 0 {
		f.out, f.start = f.buf[f.start:f.pos], f.pos
		return
	}
	f.out = f.buf[f.start:from]
	f.dropped = f.n - from
	f.dropping = true
	f.start, f.pos, f.val, f.bad, f.sc = f.n, f.n, -1, -1, valueScanner{}
}

// endDrop answers the line dropped, whose line end (at pos, unless the
// stream ended) is the SDK's, as white space.
func (f *frameReader) endDrop() {
	f.dropping = false
	if f.tooLong != nil {
		f.tooLong(f.dropped)
	}
	f.dropped = 0
	f.ended, f.took = true, false
}

// refuseLine offers refuse the line from f.bad to the line end at i, and
// passes the SDK what came before it; the line end is the SDK's, as white
// space.
func (f *frameReader) refuseLine(i int) bool {
	f.refuse(f.buf[f.bad:i])
	f.out = f.buf[f.start:f.bad]
	f.start, f.pos, f.bad = i, i, -1
	f.ended, f.took = true, false
	return true
}

// A window is what a reader of a stream (a frameReader, a downReader)
// holds of it: buf[start:n] is read and not yet passed on, and buf[pos:n]
// not yet scanned.
type window struct {
	buf     []byte
	n       int
	start   int
	pos     int // first byte not yet scanned
	val     int // where the value being scanned begins, or -1 between values
	out     []byte
	err     error // the stream's, once it returned one
	passing bool  // every byte goes on as it comes from here on
}

// fill reads more of r, keeping the bytes not yet passed on, and returns
// how far back they moved, for marks of the reader's own.
func (w *window) fill(r io.Reader) (shift int) {
	if w.start > 0 {
		shift = w.start
		copy(w.buf, w.buf[w.start:w.n])
		w.n -= w.start
		w.pos -= w.start
		if w.val >= 0 {
			w.val -= w.start
		}
		w.start = 0
	}
	if w.n == 0 && len(w.buf) > 1<<20 {
		w.buf = nil // let a long value's buffer go
	}
	if w.n >= maxFrameBytes {
		w.passing = true // the SDK refuses a value (or a line) this long
		return shift
	}
	if w.n == len(w.buf) {
		nb := make([]byte, min(max(2*len(w.buf), frameReadSize), maxFrameBytes))
		copy(nb, w.buf[:w.n])
		w.buf = nb
	}
	m, err := r.Read(w.buf[w.n:])
	w.n += m
	if err != nil {
		w.err = err
	}
	return shift
}
