package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRedactArgs feeds untrusted argument bytes to the redaction that runs
// before anything is hashed or written: it must never panic, and whatever
// it returns must hold no value of a redacted field anywhere.
func FuzzRedactArgs(f *testing.F) {
	f.Add([]byte(`{"password":"hunter22","user":"a"}`), "password")
	f.Add([]byte(`{"a":[{"api_key":{"x":1}},{"b":{"api_key":[1,2]}}]}`), "api_key")
	f.Add([]byte(`null`), "x")
	f.Add([]byte(`[1,2,{"k":"v"}] `), "k")
	f.Add([]byte(`{"k":1}{"k":2}`), "k")
	f.Fuzz(func(t *testing.T, raw []byte, field string) {
		out, _, err := redactArgs(raw, []string{field}, false)
		if err != nil {
			return
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("redacted arguments do not marshal: %v", err)
		}
		var check func(v any)
		check = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					if k == field && x != Redacted {
						t.Fatalf("field %q kept its value %v in %s", field, x, b)
					}
					check(x)
				}
			case []any:
				for _, x := range v {
					check(x)
				}
			}
		}
		var back any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&back); err != nil {
			t.Fatalf("redacted arguments do not parse back: %v", err)
		}
		check(back)
	})
}
