package log

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("does not parse: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("holds more than one JSON object")
	}
	if _, err := Canonicalize(b); err != nil {
		return fmt.Errorf("is not strict JSON: %w", err)
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("does not parse: %w", err)
	}
	return exactNames(raw, reflect.TypeOf(v), "")
}

// exactNames checks that every member of the decoded value x that a
// struct of type t (or one within it) takes is named as its field is; at
// names where x is, for messages. Every part of x is visited once.
func exactNames(x any, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := x.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, e := range x {
				if err := exactNames(e, t.Elem(), at+"."+k); err != nil {
					return err
				}
			}
		case reflect.Struct:
			for k, e := range x {
				f, ok := jsonField(t, k)
				if !ok {
					continue // one encoding/json took: an embedded or odd field
				}
				if f.name != k {
					return fmt.Errorf("member %q of %s is named %q (names are case-sensitive)", k, orTop(at), f.name)
				}
				if err := exactNames(e, f.typ, at+"."+k); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range x {
				if err := exactNames(e, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
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
func jsonField(t reflect.Type, k string) (jsonFieldOf, bool) {
	var folded *jsonFieldOf
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
		case name == k:
			return jsonFieldOf{name, f.Type}, true
		case folded == nil && strings.EqualFold(name, k):
			folded = &jsonFieldOf{name, f.Type}
		}
	}
	if folded != nil {
		return *folded, true
	}
	return jsonFieldOf{}, false
}
