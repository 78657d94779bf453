package log_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	"github.com/provlog/provlog/log"
)

// refDecodeStrict is DecodeStrict as it was before it checked names on
// the bytes: a json.Decoder that disallows unknown fields, then the names
// checked on a second decoding into a tree of maps. FuzzDecodeStrict holds
// the two to one verdict.
func refDecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("holds more than one JSON object")
	}
	if _, err := log.Canonicalize(b); err != nil {
		return err
	}
	var raw any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	return refNames(raw, reflect.TypeOf(v))
}

func refNames(x any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := x.(type) {
	case map[string]any:
		for k, e := range x {
			switch t.Kind() {
			case reflect.Map:
				if err := refNames(e, t.Elem()); err != nil {
					return err
				}
			case reflect.Struct:
				f, ok := refField(t, k)
				if !ok {
					continue
				}
				if f.Tag.Get("json") != "" && strings.Split(f.Tag.Get("json"), ",")[0] != k || f.Tag.Get("json") == "" && f.Name != k {
					return errors.New("named otherwise")
				}
				if err := refNames(e, f.Type); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, e := range x {
				if err := refNames(e, t.Elem()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func refField(t reflect.Type, k string) (reflect.StructField, bool) {
	var folded *reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Name
		if n := strings.Split(f.Tag.Get("json"), ",")[0]; n != "" {
			name = n
		}
		if name == k {
			return f, true
		}
		if folded == nil && strings.EqualFold(name, k) {
			folded = &f
		}
	}
	if folded != nil {
		return *folded, true
	}
	return reflect.StructField{}, false
}
