package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/provlog/provlog/log"
)

// The wire pieces the proxy reads and writes itself, each once: JSON-RPC
// messages (appendRequest, appendResponse, parseWire) and server-sent
// event streams (sseParser, for the HTTP downstream's answers and for the
// capture of the SDK's).

// appendRequest appends a JSON-RPC request (a notification if id is nil)
// with params (raw JSON, or nil for none).
func appendRequest(b []byte, id []byte, method string, params []byte) []byte {
	b = appendRequestHead(b, id, method)
	if params == nil {
		return append(b[:len(b)-len(paramsMember)], '}')
	}
	return append(append(b, params...), '}')
}

// appendRequestHead appends a JSON-RPC request up to its params' value:
// the caller appends the params and the closing brace.
func appendRequestHead(b []byte, id []byte, method string) []byte {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != nil {
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = appendJSONString(b, method)
	return append(b, paramsMember...)
}

const paramsMember = `,"params":`

// appendResponse appends a JSON-RPC response to request id: result, or
// the error e if it is not nil.
func appendResponse(b []byte, id, result json.RawMessage, e *jsonrpc.Error) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	if e != nil {
		eb, _ := json.Marshal(e)
		b = append(b, `,"error":`...)
		b = append(b, eb...)
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json writes it (json.Marshal:
// HTML characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced).
// Printable ASCII, newlines and valid UTF-8 it writes itself, in one
// pass: a receipt's text or a tool's name, without json.Marshal's
// allocations; anything else goes to json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	n := len(b)
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
			b = append(b, c)
			i++
			continue
		case c == '\n':
			b = append(b, `\n`...)
			i++
			continue
		case c >= 0x80:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError && r != '\u2028' && r != '\u2029' {
				b = append(b, s[i:i+size]...)
				i += size
				continue
			}
		}
		q, _ := json.Marshal(s)
		return append(b[:n], q...)
	}
	return append(b, '"')
}

// wireMessage is a JSON-RPC message from a downstream server.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`

	resultCanon []byte // Result's canonical form, when it has one
	isError     bool   // Result's isError
	// walked: read in the one pass, I-JSON (else by encoding/json);
	// named: it has a member "method" (Method "" is one).
	walked, named bool
}

// parseWire reads one JSON-RPC message from a server. A message that is
// I-JSON (what JCS accepts) is read in one pass that also yields its
// result's canonical form and isError; anything else encoding/json reads.
// The message does not keep data.
func parseWire(data []byte) (*wireMessage, error) {
	var m wireMessage
	err := log.WalkObject(data, func(k string, raw, canon []byte) error {
		switch k {
		case "jsonrpc":
			if m.Version = "2.0"; string(canon) != `"2.0"` {
				m.Version, _ = canonString(canon)
			}
		case "id":
			m.ID = bytes.Clone(raw)
		case "method":
			m.named = true
			var ok bool
			if m.Method, ok = canonString(canon); !ok {
				return errNotFast
			}
		case "params":
			m.Params = bytes.Clone(raw)
		case "result":
			m.Result = bytes.Clone(raw)
			m.resultCanon = m.Result[:len(raw):len(raw)] // a result sent canonical is its own canonical form
			if !bytes.Equal(raw, canon) {
				m.resultCanon = bytes.Clone(canon)
			}
			m.isError = canonTopTrue(canon, `"isError":`)
		case "error":
			if string(canon) != "null" {
				var err error
				m.Error, err = wireErrorOf(raw)
				return err
			}
		}
		return nil
	})
	if err == nil {
		m.walked = true
		return &m, nil
	}
	return parseWireExact(data)
}

// parseWireExact reads a message that is not I-JSON (a number beyond a
// double, a key twice, a method that is no string) with encoding/json,
// its member names matched exactly as go-sdk's jsonrpc matches them
// (encoding/json's struct decoding took "ID" for "id", "Result" for
// "result"); of a key twice the last counts, as with both.
func parseWireExact(data []byte) (*wireMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	var m wireMessage
	for _, f := range [...]struct {
		name string
		into any
	}{{"jsonrpc", &m.Version}, {"id", &m.ID}, {"method", &m.Method}, {"params", &m.Params}, {"result", &m.Result}} {
		if raw, ok := top[f.name]; ok {
			if err := json.Unmarshal(raw, f.into); err != nil {
				return nil, fmt.Errorf("the message's %q: %w", f.name, err)
			}
		}
	}
	_, m.named = top["method"]
	if raw, ok := top["error"]; ok && string(raw) != "null" {
		var err error
		if m.Error, err = wireErrorOf(raw); err != nil {
			return nil, err
		}
	}
	m.isError = resultIsError(m.Result, nil)
	return &m, nil
}

// wireErrorOf reads raw, an answer's error object, as go-sdk's jsonrpc
// reads it (its member names matched exactly, as encoding/json does
// not): an error answer is rare, and the client gets it as go-sdk would
// give it.
func wireErrorOf(raw []byte) (*jsonrpc.Error, error) {
	msg := append(append([]byte(`{"jsonrpc":"2.0","id":0,"error":`), raw...), '}')
	m, err := jsonrpc.DecodeMessage(msg)
	if err != nil {
		return nil, err
	}
	r, _ := m.(*jsonrpc.Response)
	var we *jsonrpc.Error
	if r != nil {
		we, _ = r.Error.(*jsonrpc.Error)
	}
	if we == nil {
		return nil, errors.New("the answer's error is no JSON-RPC error")
	}
	return we, nil
}

// resultIsError is the isError of result, a tools/call result as
// received: the member named exactly "isError" (as go-sdk matches it),
// true; read from its canonical form canon where it has one, as
// parseWire's walk reads it, otherwise with encoding/json. false if
// result is not an object, or its isError not true.
func resultIsError(result json.RawMessage, canon []byte) bool {
	if canon != nil {
		return canonTopTrue(canon, `"isError":`)
	}
	var r map[string]json.RawMessage
	if len(result) > 0 {
		json.Unmarshal(result, &r)
	}
	return string(r["isError"]) == "true"
}

// canonString returns the string a JSON value in canonical form holds,
// and false if it is not a string. Without escapes its bytes are the
// string's (the usual case, read without encoding/json).
func canonString(canon []byte) (string, bool) {
	if len(canon) < 2 || canon[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(canon, '\\') < 0 {
		return string(canon[1 : len(canon)-1]), true
	}
	var s string
	return s, json.Unmarshal(canon, &s) == nil
}

// canonTopTrue reports whether obj, a JSON object in canonical form (no
// white space), has the member key (given as `"name":`) at its top level
// with the value true.
func canonTopTrue(obj []byte, key string) bool {
	i := canonTop(obj, key)
	return i >= 0 && bytes.HasPrefix(obj[i:], []byte("true"))
}

// canonTop returns where the value of obj's top-level member key (given
// as `"name":`) begins, obj a JSON object in canonical form (what follows
// it is not read), or -1 if it has none. One pass over obj, no parsing of values: in canonical form a
// key is spelt without escapes, and a top-level key is a string at depth
// 1 right after '{' or ','.
func canonTop(obj []byte, key string) int {
	depth := 0
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '"':
			if depth == 1 && (obj[i-1] == '{' || obj[i-1] == ',') && bytes.HasPrefix(obj[i:], []byte(key)) {
				return i + len(key)
			}
			i = stringEnd(obj, i+1)
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return -1 // obj ended
			}
		}
	}
	return -1
}

// stringEnd returns the index of the quote that ends the JSON string
// whose contents begin at obj[i], or len(obj) if none does: the first
// quote not escaped by an odd run of backslashes. Each backslash is
// counted once, so that a scan of obj with it stays linear.
func stringEnd(obj []byte, i int) int {
	for {
		j := bytes.IndexByte(obj[i:], '"')
		if j < 0 {
			return len(obj)
		}
		q, n := i+j, 0
		for k := q - 1; k >= i && obj[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// An sseParser splits a server-sent event stream, fed to it in pieces of
// any size, into its events' data (the data lines of an event joined by
// "\n"; comments and other fields are skipped), and keeps what a resuming
// client needs: the last event id and reconnection time the stream set
// (the id and retry fields, as the HTML standard's event stream
// interpretation reads them). It is linear in its input.
type sseParser struct {
	line []byte // the current line, when it spans pieces
	data []byte // the current event's data
	has  bool   // the current event has a data line

	lastID   []byte // the last event id set (SSE keeps it across events)
	retry    int64  // the reconnection time set, in milliseconds
	hasRetry bool
	tooBig   bool // a line or an event's data went over maxEventBytes: nothing more is parsed
	fed      int  // see feed
}

// maxEventBytes bounds a line, and an event's data, that an sseParser
// holds: the SDK's own bound of an event (mcp.DefaultMaxEventSize). A
// stream that sends more without ending one is refused (errEventTooBig),
// where it held the sidecar's memory for as long as it went on.
const maxEventBytes = 16 << 20

// errEventTooBig is the error of a stream with a line or an event over
// maxEventBytes.
var errEventTooBig = errors.New("an event of the stream is over " + strconv.Itoa(maxEventBytes>>20) + " MiB without its end; the stream is given up")

// feed parses p, calling fn with each event completed in it, and reports
// false as soon as fn does (the rest of p is then not read). While fn
// runs, fed is how much of p the event's end took it through.
func (s *sseParser) feed(p []byte, fn func(data []byte) bool) bool {
	all := len(p)
	for len(p) > 0 && !s.tooBig {
		i := bytes.IndexByte(p, '\n')
		if i < 0 || len(s.line)+i > maxEventBytes {
			if s.tooBig = len(s.line)+len(p) > maxEventBytes; s.tooBig {
				return false
			}
			s.line = append(s.line, p...)
			return true
		}
		line := p[:i]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		p = p[i+1:]
		s.fed = all - len(p)
		ok := s.endLine(line, fn)
		s.line = s.line[:0]
		if !ok {
			return false
		}
	}
	return true
}

// end finishes the stream: a last line and event without their ends
// still count.
func (s *sseParser) end(fn func(data []byte) bool) {
	if s.tooBig {
		return
	}
	if len(s.line) > 0 {
		line := s.line
		s.line = nil
		if !s.endLine(line, fn) {
			return
		}
	}
	if s.has {
		s.has = false
		fn(s.data)
	}
}

func (s *sseParser) endLine(line []byte, fn func([]byte) bool) bool {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) == 0 {
		if !s.has {
			return true
		}
		s.has = false
		ok := fn(s.data)
		s.data = s.data[:0]
		return ok
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.lastID = append(s.lastID[:0], value...)
		}
		return true
	case "retry":
		// ASCII digits only; at most nine, about eleven days.
		if len(value) > 0 && len(value) <= 9 && len(bytes.Trim(value, "0123456789")) == 0 {
			n, _ := strconv.ParseInt(string(value), 10, 64)
			s.retry, s.hasRetry = n, true
		}
		return true
	default:
		return true
	}
	if s.tooBig = len(s.data)+1+len(value) > maxEventBytes; s.tooBig {
		return false
	}
	if s.has {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, value...)
	s.has = true
	return true
}

// eventBufs are sseParser.read's read buffers.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// read calls fn with the data of each server-sent event in r until fn
// returns false or r ends.
func (s *sseParser) read(r io.Reader, fn func(data []byte) bool) error {
	bp := eventBufs.Get().(*[]byte)
	defer eventBufs.Put(bp)
	for {
		n, err := r.Read(*bp)
		if n > 0 && !s.feed((*bp)[:n], fn) {
			if s.tooBig {
				return errEventTooBig
			}
			return nil
		}
		if errors.Is(err, io.EOF) {
			s.end(fn)
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// callKey is the key of a JSON-RPC id, as received, among a session's
// calls in progress: one id, one key, as the SDK decodes ids. A string is
// its value (after a quote, which no number begins with), so that "a" and
// "\u0061" are one id (keyed on the raw text, they were two: a call
// under the second was made while the first was in progress); an integer
// is its text (both fronts let on only plain digits within ±2^53, not -0:
// badRequestID), but a cancellation's requestId -0, which the SDK reads
// as 0, is 0. Both fronts' fast paths key their calls so.
func callKey(id []byte) string {
	id = bytes.TrimSpace(id)
	switch {
	case len(id) < 2 || id[0] != '"':
		if string(id) == "-0" {
			return "0"
		}
		return string(id)
	case bytes.IndexByte(id, '\\') < 0:
		return string(id[:len(id)-1])
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return string(id)
	}
	return `"` + s
}
