package log

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// appendCanonical appends the RFC 8785 form of v, a Go value as
// encoding/json marshals it, to dst: exactly what
// Canonicalize(json.Marshal(v)) gives, and an error where that fails, but
// without writing the JSON out and parsing it back for the types entries
// are made of (strings, numbers, booleans, json.Number, json.RawMessage,
// maps with string keys, slices). Other types take that round trip. depth
// is the number of objects and arrays v is inside.
func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendGoString(dst, v), nil
	case bool:
		if v {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case int:
		return appendJCSNumber(dst, float64(v)), nil
	case int64:
		return appendJCSNumber(dst, float64(v)), nil
	case int32:
		return appendJCSNumber(dst, float64(v)), nil
	case uint64:
		return appendJCSNumber(dst, float64(v)), nil
	case uint32:
		return appendJCSNumber(dst, float64(v)), nil
	case uint:
		return appendJCSNumber(dst, float64(v)), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("unsupported number %v", v)
		}
		return appendJCSNumber(dst, v), nil
	case json.Number:
		if v == "" {
			return append(dst, '0'), nil // as encoding/json writes it
		}
		p := jcsParser{in: []byte(v), out: dst}
		if err := p.number(); err != nil || p.pos != len(p.in) {
			return nil, fmt.Errorf("invalid number %s", jcsQuote(string(v)))
		}
		return p.out, nil
	case CanonicalJSON:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return append(dst, v...), nil
	case json.RawMessage:
		if v == nil {
			return append(dst, "null"...), nil // as encoding/json writes it (and refuses an empty one)
		}
		return appendCanonicalJSON(dst, v, depth)
	case map[string]any:
		return appendCanonicalMap(dst, v, depth)
	case map[string]string:
		return appendCanonicalMap(dst, v, depth)
	case []any:
		return appendCanonicalSlice(dst, v, depth)
	case []string:
		return appendCanonicalSlice(dst, v, depth)
	default:
		// Structs, pointers, []byte (base64), float32 (written with 32-bit
		// digits), Marshalers...: encoding/json knows best.
		return appendMarshalled(dst, v, depth)
	}
}

// appendCanonicalMap appends m as a canonical object (null if nil).
func appendCanonicalMap[V any](dst []byte, m map[string]V, depth int) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	keys, ok := sortedKeys(m)
	if !ok {
		return appendMarshalled(dst, m, depth)
	}
	if depth+1 > maxJCSDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJCSDepth)
	}
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendGoString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendCanonical(dst, m[k], depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendCanonicalSlice appends s as a canonical array (null if nil).
func appendCanonicalSlice[V any](dst []byte, s []V, depth int) ([]byte, error) {
	if s == nil {
		return append(dst, "null"...), nil
	}
	if depth+1 > maxJCSDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxJCSDepth)
	}
	dst = append(dst, '[')
	for i, x := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCanonical(dst, x, depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendMarshalled appends the canonical form of json.Marshal(v).
func appendMarshalled(dst []byte, v any, depth int) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return appendCanonicalJSON(dst, b, depth)
}

// appendCanonicalJSON appends the canonical form of the JSON text data,
// found inside depth objects and arrays.
func appendCanonicalJSON(dst, data []byte, depth int) ([]byte, error) {
	p := jcsParser{in: data, out: dst}
	p.skipSpace()
	if err := p.value(depth); err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return nil, p.errorf(p.pos, "unexpected %s after a value", jcsDescribe(p.in[p.pos]))
	}
	return p.out, nil
}

// sortedKeys returns m's keys in RFC 8785 order, or false if one is not
// valid UTF-8 (encoding/json would replace its bad bytes, which may make
// two keys one; the round trip sorts that out).
func sortedKeys[V any](m map[string]V) ([]string, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !utf8.ValidString(k) {
			return nil, false
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	return keys, true
}

// appendGoString appends s as a canonical JSON string. Bytes that are not
// valid UTF-8 become U+FFFD, as encoding/json makes them.
func appendGoString(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendJCSString(dst, s)
	}
	var b bytes.Buffer
	for _, r := range s { // ranging yields U+FFFD for each bad byte
		b.WriteRune(r)
	}
	return appendJCSString(dst, b.Bytes())
}

// CanonicalJSON is JSON text already in RFC 8785 canonical form, such as
// what [WalkObject] hands out. [Entry.Marshal] copies it as it is, so it
// must be canonical; anything else would make an entry that [ParseEntry]
// refuses.
type CanonicalJSON []byte

// MarshalJSON returns c (null if nil), so encoding/json writes it as JSON.
func (c CanonicalJSON) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	return c, nil
}

// WalkObject reads data as one JSON object, as strictly as [Canonicalize]
// does, and calls fn with each member in order: its key, its value's bytes
// as they appear in data, and the value's canonical form, which is only
// good until fn returns. A key without escapes is data's own bytes: it
// stays as it is only while data does. It stops at fn's first error and returns it.
// Duplicate keys and anything Canonicalize refuses are errors.
func WalkObject(data []byte, fn func(key string, raw, canon []byte) error) error {
	return WalkObjectIn(data, fn, nil)
}

// WalkObjectIn is [WalkObject], and in the same pass walks the members of
// the object values of members for which in returns a function: that
// function is called with each of their members, as fn is with those of
// data, before fn is called with the whole value. A value read once is
// not read again (a JSON-RPC message's params, say, whose arguments' own
// canonical form is wanted too). in may be nil.
func WalkObjectIn(data []byte, fn func(key string, raw, canon []byte) error, in func(key string) func(key string, raw, canon []byte) error) error {
	// The parser's buffers are reused from walk to walk: nothing of them
	// outlives a walk (canonical forms are good only until fn returns,
	// keys are data's bytes or copies, errors carry none of them).
	p := walkParsers.Get().(*jcsParser)
	p.in = data
	if cap(p.out) < len(data) {
		// A member's canonical form is about as long as its input: room
		// for the longest saves growing the buffer member by member.
		p.out = make([]byte, 0, len(data))
	}
	err := walkObject(p, fn, in)
	putWalkParser(p)
	return err
}

// walkParsers holds parsers for WalkObjectIn, their buffers emptied.
var walkParsers = sync.Pool{New: func() any { return new(jcsParser) }}

// maxPooledBytes and maxPooledMembers bound the buffers a parser keeps
// in walkParsers: one that grew beyond, for a big object, is left to the
// collector.
const (
	maxPooledBytes   = 64 << 10
	maxPooledMembers = 1024
)

// putWalkParser empties p and puts it back in walkParsers, unless a
// buffer of it is over maxPooledBytes (or maxPooledMembers).
func putWalkParser(p *jcsParser) {
	if cap(p.out) > maxPooledBytes || cap(p.scratch) > maxPooledBytes || cap(p.str) > maxPooledBytes || cap(p.members) > maxPooledMembers {
		return
	}
	members := p.members[:cap(p.members)]
	clear(members) // the keys of the last walk
	*p = jcsParser{out: p.out[:0], members: members[:0], scratch: p.scratch[:0], str: p.str[:0]}
	walkParsers.Put(p)
}

// walkObject is WalkObjectIn on a parser of its own, whose probes tests
// read.
func walkObject(p *jcsParser, fn func(key string, raw, canon []byte) error, in func(key string) func(key string, raw, canon []byte) error) error {
	p.skipSpace()
	if p.peek() != '{' {
		return p.unexpected("'{'")
	}
	p.pos++
	mark := len(p.members)
	defer func() { p.members = p.members[:mark] }()
	var seen map[string]bool
	p.skipSpace()
	if p.peek() == '}' {
		p.pos++
	} else {
		for {
			_, _, key, err := p.memberKey(mark, &seen)
			if err != nil {
				return err
			}
			if seen == nil {
				p.members = append(p.members, jcsMember{key: key})
			}
			start := p.pos
			p.out = p.out[:0]
			var each func(key string, raw, canon []byte) error
			if in != nil && p.peek() == '{' {
				each = in(key)
			}
			if each != nil {
				err = p.object(2, each)
			} else {
				err = p.value(1)
			}
			if err != nil {
				return err
			}
			if err := fn(key, p.in[start:p.pos], p.out); err != nil {
				return err
			}
			p.skipSpace()
			if p.peek() == ',' {
				p.pos++
				continue
			}
			if p.peek() != '}' {
				return p.unexpected("',' or '}'")
			}
			p.pos++
			break
		}
	}
	p.skipSpace()
	if p.pos < len(p.in) {
		return p.errorf(p.pos, "unexpected %s after the object", jcsDescribe(p.in[p.pos]))
	}
	return nil
}

// A member is one member of an entry's object, its value held by type, so
// that an entry whose kind knows its members (a call, a call.result) is
// written without a map of boxed values: appendMembers writes for each
// what appendCanonical writes for the same Go value.
type member struct {
	key  string
	kind memberKind
	s    string    // memberString
	f    float64   // memberNumber: integers too, as JCS reads them (doubles)
	b    bool      // memberBool
	raw  []byte    // memberCanonical: CanonicalJSON (nil: null)
	t    time.Time // memberTime
	sub  []member  // memberObject
	v    int       // memberAny: the index of its value in appendMembers' vals
}

type memberKind uint8

const (
	memberAny memberKind = iota
	memberString
	memberNumber
	memberBool
	memberCanonical
	memberTime   // a string in TimeFormat, in UTC
	memberObject // an object of the members sub
)

func strMember(k, v string) member            { return member{key: k, kind: memberString, s: v} }
func numMember(k string, v float64) member    { return member{key: k, kind: memberNumber, f: v} }
func boolMember(k string, v bool) member      { return member{key: k, kind: memberBool, b: v} }
func timeMember(k string, t time.Time) member { return member{key: k, kind: memberTime, t: t} }

// membersSize is about the bytes ms take written, for sizing a buffer.
func membersSize(ms []member) int {
	n := 2
	for i := range ms {
		n += len(ms[i].key) + len(ms[i].s) + len(ms[i].raw) + membersSize(ms[i].sub) + 40
	}
	return n
}

// appendMembers appends the members ms, found inside depth objects and
// arrays, as one canonical object: sorted (keys must be unique and valid
// UTF-8), each value as appendCanonical writes it; those of memberAny are
// in vals (apart, so that the members need not escape). An error names
// the member whose value could not be written.
func appendMembers(dst []byte, ms []member, vals []any, depth int) ([]byte, string, error) {
	// Sorted by index, the members stay put: a dozen of them, in order
	// already but for the common ones, take an insertion sort.
	var buf [24]int
	order := buf[:0]
	if len(ms) > len(buf) {
		order = make([]int, 0, len(ms))
	}
	for i := range ms {
		order = append(order, i)
	}
	byKey := func(a, b int) int { return compareUTF16(ms[a].key, ms[b].key) }
	if len(order) > len(buf) {
		slices.SortFunc(order, byKey)
	} else {
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && byKey(order[j-1], order[j]) > 0; j-- {
				order[j-1], order[j] = order[j], order[j-1]
			}
		}
	}
	dst = append(dst, '{')
	for i, o := range order {
		m := &ms[o]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJCSString(dst, m.key)
		dst = append(dst, ':')
		var err error
		switch m.kind {
		case memberString:
			dst = appendGoString(dst, m.s)
		case memberNumber:
			dst = appendJCSNumber(dst, m.f)
		case memberBool:
			dst = strconv.AppendBool(dst, m.b)
		case memberCanonical:
			if m.raw == nil {
				dst = append(dst, "null"...) // as a nil CanonicalJSON
			} else {
				dst = append(dst, m.raw...)
			}
		case memberTime:
			dst = m.t.UTC().AppendFormat(append(dst, '"'), TimeFormat)
			dst = append(dst, '"')
		case memberObject:
			dst, _, err = appendMembers(dst, m.sub, vals, depth+1)
		default:
			dst, err = appendCanonical(dst, vals[m.v], depth)
		}
		if err != nil {
			return nil, m.key, err
		}
	}
	return append(dst, '}'), "", nil
}
