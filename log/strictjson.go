package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// DecodeStrict decodes b, a file or member a verifier reads from someone
// it does not trust, into v (a pointer to a struct): b must be one JSON
// value in strict form ([Canonicalize] accepts it: no member named twice,
// no number it would read otherwise), with no member v does not have, each
// named exactly as v names it. encoding/json alone matches names without
// regard to case and lets the last of two members win, so that "Origin"
// and "origin" in one object read as one member, whichever came last,
// where another reader (the page, another verifier) takes the other.
//
// It allocates about what the decoded value and one canonical copy of b
// take: b is decoded once, and the names are checked on b's bytes, not on
// a second decoding (a 12 MB file cost 16 times its size).
func DecodeStrict(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && strings.HasSuffix(se.Error(), "after top-level value") {
			return errors.New("holds more than one JSON object")
		}
		return fmt.Errorf("does not parse: %w", err)
	}
	return CheckStrict(b, v)
}

// CheckStrict checks, without decoding it, what [DecodeStrict] requires
// of b beyond decoding into v: strict form, and member names exactly v's
// with none it does not have. A parser that decodes b a piece at a time
// (a long list) checks it with CheckStrict first.
func CheckStrict(b []byte, v any) error {
	if _, err := Canonicalize(b); err != nil {
		return fmt.Errorf("is not strict JSON: %w", err)
	}
	w := nameWalk{b: b}
	return w.value(reflect.TypeOf(v))
}

// nameWalk checks the member names of b, JSON that [Canonicalize]
// accepts, against the type it was decoded into: each member a struct
// takes is named exactly as its field is, and a struct has no member it
// does not take (as a json.Decoder that disallows unknown fields). It
// reads every byte of b once and allocates nothing but for a member name
// holding an escape.
type nameWalk struct {
	b    []byte
	pos  int
	path []byte // where the value being read is, for messages
}

func (w *nameWalk) space() {
	for w.pos < len(w.b) && (w.b[w.pos] == ' ' || w.b[w.pos] == '\t' || w.b[w.pos] == '\n' || w.b[w.pos] == '\r') {
		w.pos++
	}
}

// value reads one value of type t (nil: any, not checked).
func (w *nameWalk) value(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	w.space()
	if w.pos >= len(w.b) {
		return errors.New("does not parse: unexpected end of JSON input")
	}
	switch w.b[w.pos] {
	case '{':
		return w.object(t)
	case '[':
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		w.pos++
		at := len(w.path)
		for i := 0; ; i++ {
			w.space()
			if w.b[w.pos] == ']' {
				w.pos++
				return nil
			}
			if w.b[w.pos] == ',' {
				w.pos++
			}
			w.path = strconv.AppendInt(append(w.path, '['), int64(i), 10)
			w.path = append(w.path, ']')
			if err := w.value(et); err != nil {
				return err
			}
			w.path = w.path[:at]
		}
	case '"':
		w.str()
	default:
		for w.pos < len(w.b) && strings.IndexByte(",}] \t\n\r", w.b[w.pos]) < 0 {
			w.pos++
		}
	}
	return nil
}

// object reads an object whose type is t.
func (w *nameWalk) object(t reflect.Type) error {
	w.pos++
	at := len(w.path)
	for {
		w.space()
		switch w.b[w.pos] {
		case '}':
			w.pos++
			return nil
		case ',':
			w.pos++
			w.space()
		}
		k, err := w.key()
		if err != nil {
			return err
		}
		w.space()
		w.pos++ // ':'
		var et reflect.Type
		switch {
		case t == nil:
		case t.Kind() == reflect.Map:
			et = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := jsonField(t, k)
			switch {
			case ok && !bytes.Equal([]byte(f.name), k):
				return fmt.Errorf("member %q of %s is named %q (names are case-sensitive)", k, orTop(string(w.path)), f.name)
			case ok:
				et = f.typ
			case closedStruct(t):
				return fmt.Errorf("does not parse: json: unknown field %q", k)
			}
		}
		w.path = append(append(w.path, '.'), k...)
		if err := w.value(et); err != nil {
			return err
		}
		w.path = w.path[:at]
	}
}

// str skips a string and returns its bytes between the quotes, as written.
func (w *nameWalk) str() []byte {
	start := w.pos + 1
	for w.pos++; w.pos < len(w.b) && w.b[w.pos] != '"'; w.pos++ {
		if w.b[w.pos] == '\\' {
			w.pos++
		}
	}
	w.pos++
	return w.b[start : w.pos-1]
}

// key reads a member name, unescaped.
func (w *nameWalk) key() ([]byte, error) {
	start := w.pos
	raw := w.str()
	if !bytes.ContainsRune(raw, '\\') {
		return raw, nil
	}
	var k string
	if err := json.Unmarshal(w.b[start:w.pos], &k); err != nil {
		return nil, fmt.Errorf("does not parse: %w", err)
	}
	return []byte(k), nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// closedStruct reports whether struct t takes only the members its own
// fields name: it embeds no struct (whose fields encoding/json takes as
// its own) and decodes itself by no UnmarshalJSON of its own.
func closedStruct(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).Anonymous {
			return false
		}
	}
	return true
}

func orTop(at string) string {
	if at == "" {
		return "the object"
	}
	return strings.TrimPrefix(at, ".")
}

type jsonFieldOf struct {
	name string
	typ  reflect.Type
}

// jsonField is the field of struct t that encoding/json decodes member k
// into, matching k as encoding/json does (exactly, else without regard
// to case), and the name it has in JSON.
func jsonField(t reflect.Type, k []byte) (jsonFieldOf, bool) {
	var folded jsonFieldOf
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			if n, _, _ := strings.Cut(tag, ","); n != "" {
				name = n
			}
		}
		switch {
		case name == string(k):
			return jsonFieldOf{name, f.Type}, true
		case folded.typ == nil && bytes.EqualFold([]byte(name), k):
			folded = jsonFieldOf{name, f.Type}
		}
	}
	return folded, folded.typ != nil
}
