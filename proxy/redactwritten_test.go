package proxy

import (
	"slices"
	"testing"
)

// TestWrittenSecrets: the redacted strings a client wrote with JSON's
// escapes are found as written, at any depth and inside a redacted
// object or array, and nothing else is.
func TestWrittenSecrets(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
	}{
		{`{"token":"plain","note":"\u0065"}`, nil},
		{`{"note":"x","Token" : "\u0065sc\/1","n":[{"token":["a\"b",{"k":"c\\d"}]}]}`, []string{`\u0065sc\/1`, `a\"b`, `c\\d`}},
		{`[{"a":{"token":{"x\u0079":1}}},{"token":7}]`, []string{`x\u0079`}},
		{`{"token":"\u0065"`, []string{`\u0065`}}, // cut short: what was read
	} {
		got := writtenSecrets([]byte(c.raw), []string{"token"}, true)
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.raw, got, c.want)
		}
	}
}
