package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type durInner struct {
	Every time.Duration `yaml:"every"`
}

type durConfig struct {
	Delay     *time.Duration           `yaml:"delay"`
	Inner     durInner                 `yaml:"inner"`
	List      []durInner               `yaml:"list"`
	ByName    map[string]time.Duration `yaml:"by_name"`
	Default   time.Duration
	durInline `yaml:",inline"`
}

type durInline struct {
	Flat time.Duration `yaml:"flat"`
}

// TestDecodeYAML: every value bound for a time.Duration, wherever the
// type puts it, is checked and named with its line and key; good ones
// decode.
func TestDecodeYAML(t *testing.T) {
	var c durConfig
	good := "delay: 2ms\ninner: {every: 1m}\nlist:\n  - every: 0s\nby_name: {a: 1h}\ndefault: 3s\nflat: 4s\nanchor: &x 5s\n"
	if err := DecodeYAML([]byte(good), &c); err == nil || !strings.Contains(err.Error(), "field anchor not found") {
		t.Fatalf("an unknown key: %v", err)
	}
	good = strings.TrimSuffix(good, "anchor: &x 5s\n")
	if err := DecodeYAML([]byte(good), &c); err != nil {
		t.Fatal(err)
	}
	if *c.Delay != 2*time.Millisecond || c.Inner.Every != time.Minute || c.List[0].Every != 0 || c.ByName["a"] != time.Hour || c.Default != 3*time.Second || c.Flat != 4*time.Second {
		t.Fatalf("decoded %+v", c)
	}
	for _, tc := range []struct{ text, want string }{
		{"delay: 60", `line 1: delay: "60" has no unit: write it as 30s, 2m or 2ms`},
		{"delay: 1.5", `line 1: delay: "1.5" has no unit`},
		{"inner:\n  every: soon", `line 2: inner.every: "soon" is not a duration`},
		{"list:\n  - every: 1s\n  - every: 7", `line 3: list[1].every: "7" has no unit`},
		{"by_name: {a: 1s, b: -1s}", `line 1: by_name.b: duration "-1s" is negative`},
		{"default: 9", `line 1: default: "9" has no unit`},
		{"flat: {x: 1}", `line 1: flat: want a duration`},
		{"a: &d 5\ndelay: *d", `line 1: delay: "5" has no unit`},
		{"list: [~]", `line 1: list[0]: an empty item (~ or null); remove it or fill it in`},
		{"list:\n  - every: 1s\n  -\n", `line 3: list[1]: an empty item`},
		{"inner: {every: 1s}\nlist: [{every: 1s}, null]", `line 2: list[1]: an empty item`},
	} {
		var c durConfig
		err := DecodeYAML([]byte(tc.text), &c)
		if err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}

// A document of aliases of aliases ("billion laughs") is walked once per
// node; the decoder then refuses it.
func TestDecodeYAMLAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	// nested follows every alias down to the leaves: walked without the
	// once-per-node rule, this would not end.
	var c map[string]nested
	if err := DecodeYAML([]byte(b.String()), &c); err == nil {
		t.Fatal("a billion laughs decoded")
	}
}

type nested []nested

// TestDecodeYAMLNamesNoValue: a value of the wrong type is named by its
// line and types, never quoted, whatever it holds (backquotes, " into ",
// line breaks).
func TestDecodeYAMLNamesNoValue(t *testing.T) {
	var v struct {
		Headers map[string]string `yaml:"headers"`
		N       int               `yaml:"n"`
	}
	for _, secret := range []string{"hunter2pw", "a`b into c` d", "sk-live-0123456789", "two\n  lines into x"} {
		for _, doc := range []string{"headers: %q\n", "n: %q\n"} {
			err := DecodeYAML(fmt.Appendf(nil, doc, secret), &v)
			if err == nil {
				t.Fatalf("%q decoded", doc)
			}
			if strings.Contains(err.Error(), secret[:4]) || !strings.Contains(err.Error(), "line 1: cannot unmarshal !!str into ") {
				t.Errorf("%q: %v", fmt.Sprintf(doc, secret), err)
			}
		}
	}
}
