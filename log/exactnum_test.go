package log

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// TestExactNumbers: the scan for numbers JCS writes as others skips
// strings, escaped quotes and backslashes included, finds numbers at any
// depth, and names the number and what JCS makes of it.
func TestExactNumbers(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"x\"12345678901234567891"}`:       "",
		`{"a":"x\\","b":12345678901234567891}`:  "12345678901234567891 is beyond ±2^53 and would be recorded as 12345678901234567000",
		`{"a":"\\\"","b":1}`:                    "",
		`{"a":"\\\\","b":98765432109876543210}`: "beyond ±2^53",
		`["12345678901234567891",1e-400]`:       "1e-400 is too small for a double",
		`["12345678901234567891\\\\"]`:          "",
		`{"a":[{"b":[-9007199254740993]}]}`:     "-9007199254740993 is beyond ±2^53 and would be recorded as -9007199254740992",
		`{"a":1.5e-320,"b":0e-999,"c":-0.0}`:    "",
		`[9007199254740992,18014398509481984]`:  "",
		`0.1000000000000000055511151231257827`:  "",
		`1` + strings.Repeat("0", 80) + `1`:     "…",
	} {
		err := ExactNumbers([]byte(in))
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("ExactNumbers(%s) = %v, want an error saying %q", in, err, want)
		}
	}
}

// FuzzExactNumbers: on any value JCS accepts, ExactNumbers finds an
// inexact number exactly when one of the value's numbers, decoded in full
// (math/big), is not what its JCS form says: JCS forms of a value holding
// none equal those of the value with every number written exactly.
func FuzzExactNumbers(f *testing.F) {
	for _, s := range []string{`{"a":12345678901234567891}`, `[1e-400,"1e-400"]`, `{"a":"\\","b":9007199254740993}`,
		`[0.1,-0,1E+2,123456789012345678901234567890e-10]`, `"\"12345678901234567891"`, `{"n":1.5e-320}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := Canonicalize(in); err != nil {
			return
		}
		dec := json.NewDecoder(strings.NewReader(string(in)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("JCS took %q, encoding/json did not: %v", in, err)
		}
		want := ""
		walkNumbers(v, func(n json.Number) {
			if want == "" && inexactByBig(string(n)) {
				want = string(n)
			}
		})
		err := ExactNumbers(in)
		if (err != nil) != (want != "") {
			t.Fatalf("ExactNumbers(%q) = %v; the first inexact number by math/big: %q", in, err, want)
		}
	})
}

func walkNumbers(v any, fn func(json.Number)) {
	switch x := v.(type) {
	case json.Number:
		fn(x)
	case []any:
		for _, e := range x {
			walkNumbers(e, fn)
		}
	case map[string]any:
		for _, e := range x {
			walkNumbers(e, fn)
		}
	}
}

// inexactByBig says, by math/big alone, whether lit is an integer no
// double equals or a nonzero number that rounds to 0.
func inexactByBig(lit string) bool {
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return false
	}
	f, _ := r.Float64()
	if r.Sign() != 0 && f == 0 {
		return true
	}
	if strings.ContainsAny(lit, ".eE") {
		return false
	}
	back := new(big.Rat)
	back.SetFloat64(f)
	return back.Cmp(r) != 0
}

// TestExactNumbersAllocs: the scan every result and every call's
// arguments go through allocates nothing for numbers under 16 digits, nor
// for strings, however long or escaped.
func TestExactNumbersAllocs(t *testing.T) {
	in := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat(`a \"quoted\" 12345678901234567891 `, 100) + `"}],` +
		`"structuredContent":{"ids":[1,-2,3.5e10,9007199254740991,0.25],"ok":true,"none":null}}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := ExactNumbers(in); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ExactNumbers allocated %v times a run, want 0", n)
	}
}
