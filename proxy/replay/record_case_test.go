package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestParseRecordMemberCase: a member of range or of a definition change
// is read by its exact name. encoding/json matches a struct's field names
// in any case, and DisallowUnknownFields does not refuse a name in
// another case, so "From" read as from, and a change could hold a second
// "SERVER" beside its server: two spellings, or a member of the client's
// own, under the replay kind.
func TestParseRecordMemberCase(t *testing.T) {
	base, err := log.ParseEntry(goldenEntries(t)["entry-definition-changed.json"])
	if err != nil {
		t.Fatal(err)
	}
	const then, now = `"tool_sha256_then":"87d8664d2c6f100c76582ebf33a550a0cf726ed68faf95217d7b65c97a3bbaba"`, `"tool_sha256_now":"04dd90397d93ab3d0f082e74e44329546a66652c01a95fed847de7c7559a74ef"`
	for _, c := range []struct{ name, fields, words string }{
		{"range From", `"range":{"From":0,"to":6}`, `range has unknown field "From"`},
		{"range from twice", `"range":{"FROM":5,"from":0,"to":6}`, `range has unknown field "FROM"`},
		{"change SERVER", `"definition_changes":[{"calls":"2","server":"fx","SERVER":"mine","tool":"stable",` + then + `,` + now + `}]`, `definition_changes[0] has unknown field "SERVER"`},
	} {
		e := &log.Entry{Kind: KindReplay, Time: base.Time, Actor: base.Actor, Fields: map[string]any{}}
		for k, v := range base.Fields {
			e.Fields[k] = v
		}
		if err := json.Unmarshal([]byte("{"+c.fields+"}"), &e.Fields); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := ParseRecord(e); err == nil || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: ParseRecord: %v, want an error saying %q", c.name, err, c.words)
		}
	}
}
