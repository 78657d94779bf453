package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The members scanCallLink reads, as bits, to refuse a duplicate.
const (
	linkKind = 1 << iota
	linkActor
	linkContinues
	linkCall
	// A call with any of these holds its own outcome (ParseCall).
	linkIsError
	linkDuration
	linkResult
)

var errCallScan = errors.New("call link: not a JSON object in canonical form")

// scanCallLink reads from an entry's bytes what [CallTracker.Add] reads of
// the parsed entry, without decoding the rest: it walks the top-level
// members once, skipping nested values by counting brackets (no
// recursion, no allocation), so it is linear in b. It expects JCS (no
// whitespace) and refuses what it cannot read so, and a duplicate of a
// member it reads; it does not check the members it skips.
func scanCallLink(b []byte) (callLink, error) {
	if len(b) > MaxEntrySize {
		return callLink{}, fmt.Errorf("entry: %d bytes, over the limit of %d: %w", len(b), MaxEntrySize, ErrEntryTooLarge)
	}
	var kind, actor, continues, call []byte
	var seen uint
	s := callScanner{b: b}
	if !s.next('{') {
		return callLink{}, errCallScan
	}
	for !s.next('}') {
		if s.pos > 1 && !s.next(',') {
			return callLink{}, errCallScan
		}
		key, ok := s.skipString()
		if !ok || !s.next(':') {
			return callLink{}, errCallScan
		}
		start := s.pos
		if !s.skipValue() {
			return callLink{}, errCallScan
		}
		v := b[start:s.pos]
		var bit uint
		switch string(key[1 : len(key)-1]) {
		case "kind":
			bit, kind = linkKind, v
		case "actor":
			bit, actor = linkActor, v
		case "continues":
			bit, continues = linkContinues, v
		case "call":
			bit, call = linkCall, v
		case "is_error":
			bit = linkIsError
		case "duration_ns":
			bit = linkDuration
		case "result_sha256":
			bit = linkResult
		}
		if seen&bit != 0 {
			return callLink{}, fmt.Errorf("call link: duplicate member %s", key)
		}
		seen |= bit
	}
	if s.pos != len(b) {
		return callLink{}, errCallScan
	}
	var l callLink
	switch string(kind) {
	case `"` + KindCall + `"`:
		l.kind, l.inline = KindCall, seen&(linkIsError|linkDuration|linkResult) != 0
		if continues != nil {
			n, err := linkIndex("continues", continues)
			if err != nil {
				return callLink{}, err
			}
			l.ref = n
		}
	case `"` + KindCallResult + `"`:
		if call == nil {
			return callLink{}, errors.New(`call.result entry: field "call": missing`)
		}
		n, err := linkIndex("call", call)
		if err != nil {
			return callLink{}, err
		}
		l.kind, l.ref = KindCallResult, n
	default:
		return callLink{}, nil
	}
	a, err := linkString(actor)
	if err != nil {
		return callLink{}, err
	}
	l.actor = a
	return l, nil
}

// linkIndex reads member k's value v as fieldReader.int does.
func linkIndex(k string, v []byte) (uint64, error) {
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, fmt.Errorf("field %q: not a number", k)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("field %q: not a non-negative integer", k)
	}
	return uint64(n), nil
}

// linkString reads a string value v, quotes included, as encoding/json
// does; one without escapes is its bytes.
func linkString(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' {
		return "", errors.New(`entry: "actor" must be a string`)
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("entry: \"actor\": %w", err)
	}
	return s, nil
}

// A callScanner walks JSON without whitespace.
type callScanner struct {
	b   []byte
	pos int
}

// next consumes c if it comes next.
func (s *callScanner) next(c byte) bool {
	if s.pos < len(s.b) && s.b[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// skipString skips the string at pos and returns it, quotes included.
func (s *callScanner) skipString() ([]byte, bool) {
	start := s.pos
	if !s.next('"') {
		return nil, false
	}
	for {
		j := bytes.IndexByte(s.b[s.pos:], '"')
		if j < 0 {
			return nil, false
		}
		q := s.pos + j
		// The quote is escaped if an odd number of backslashes precede
		// it; each backslash is counted once, as the next search starts
		// after this quote.
		n := 0
		for q-n-1 >= s.pos && s.b[q-n-1] == '\\' {
			n++
		}
		s.pos = q + 1
		if n%2 == 0 {
			return s.b[start:s.pos], true
		}
	}
}

// skipValue skips the value at pos: a string, a literal or number, or an
// object or array, whose brackets it counts (it does not check that they
// pair, nor what is between them).
func (s *callScanner) skipValue() bool {
	if s.pos >= len(s.b) {
		return false
	}
	switch c := s.b[s.pos]; {
	case c == '"':
		_, ok := s.skipString()
		return ok
	case c == '{' || c == '[':
		depth := 0
		for s.pos < len(s.b) {
			switch s.b[s.pos] {
			case '"':
				if _, ok := s.skipString(); !ok {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return true
				}
			}
			s.pos++
		}
		return false
	}
	start := s.pos
	for s.pos < len(s.b) && isScalarByte(s.b[s.pos]) {
		s.pos++
	}
	return s.pos > start
}

// isScalarByte reports whether c may be in a number, true, false or null.
func isScalarByte(c byte) bool {
	switch c {
	case '-', '+', '.', 'E', 'e', 'a', 'f', 'l', 'n', 'r', 's', 't', 'u':
		return true
	}
	return '0' <= c && c <= '9'
}
