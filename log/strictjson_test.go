package log_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

type strictInner struct {
	Size uint64 `json:"size"`
}

type strictDoc struct {
	Origin string                 `json:"origin"`
	Proofs []strictInner          `json:"proofs"`
	ByName map[string]strictInner `json:"by_name"`
	Ptr    *strictInner           `json:"ptr,omitempty"`
	Plain  string
}

// TestDecodeStrict: a member named otherwise than its field in case
// ("Origin", "SIZE", deep in a list or a map) is refused, naming it, where
// encoding/json took it, and took the last of "origin" and "ORIGIN" in one
// object; so are members named twice, unknown ones and a second value.
func TestDecodeStrict(t *testing.T) {
	var d strictDoc
	good := `{"by_name":{"a":{"size":2}},"origin":"o","Plain":"p","proofs":[{"size":1}],"ptr":{"size":3}}`
	if err := log.DecodeStrict([]byte(good), &d); err != nil || d.Origin != "o" || d.Proofs[0].Size != 1 || d.ByName["a"].Size != 2 || d.Ptr.Size != 3 || d.Plain != "p" {
		t.Fatalf("%s: %v %+v", good, err, d)
	}
	for in, want := range map[string]string{
		`{"Origin":"o"}`:                     `member "Origin" of the object is named "origin"`,
		`{"ORIGIN":"evil","origin":"o"}`:     `member "ORIGIN" of the object is named "origin"`,
		`{"proofs":[{"size":1},{"Size":2}]}`: `member "Size" of proofs[1] is named "size"`,
		`{"by_name":{"k":{"SIZE":1}}}`:       `member "SIZE" of by_name.k is named "size"`,
		`{"ptr":{"sizE":1}}`:                 `member "sizE" of ptr is named "size"`,
		`{"plain":"p"}`:                      `member "plain" of the object is named "Plain"`,
		`{"origin":"a","origin":"b"}`:        `is not strict JSON`,
		`{"other":1}`:                        `unknown field "other"`,
		`{"origin":"a"} {"origin":"b"}`:      `holds more than one JSON object`,
		`{"proofs":[{"size":1e400}]}`:        `does not parse`,
	} {
		var d strictDoc
		if err := log.DecodeStrict([]byte(in), &d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

// FuzzDecodeStrict: DecodeStrict never panics, what it accepts
// encoding/json reads the same way, and it accepts what the decoding it
// replaced (refDecodeStrict: a json.Decoder, then the names checked on a
// tree of maps) accepts, and nothing else, into the same value.
func FuzzDecodeStrict(f *testing.F) {
	f.Add([]byte(`{"by_name":{"a":{"size":2}},"origin":"o","proofs":[{"size":1}]}`))
	f.Add([]byte(`{"Origin":"o","origin":"p"}`))
	f.Add([]byte(`{"proofs":[{"size":1},{"Size":2}],"ptr":null}`))
	f.Add([]byte(`{"by_name":{"a":{"size":2}},"origin":"o"} `))
	f.Add([]byte(`{"other":{"Size":[1,{"x":2}]}}`))
	f.Add([]byte(`{"proofs":[{"size":1}, {"size":2}],"\u006frigin":"o"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d, ref strictDoc
		err := log.DecodeStrict(b, &d)
		refErr := refDecodeStrict(b, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%s: DecodeStrict %v, the decoding it replaced %v", b, err, refErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(d, ref) {
			t.Fatalf("%s: DecodeStrict gives %+v, the decoding it replaced %+v", b, d, ref)
		}
		if strings.Contains(strings.ToLower(string(b)), `"origin"`) && !strings.Contains(string(b), `"origin"`) {
			t.Fatalf("%s: accepted an origin member named otherwise", b)
		}
	})
}
