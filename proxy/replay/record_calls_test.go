package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestParseRecordCallsOnce: each call a record names is named in one
// class of outcomes, and a definition change names calls among those the
// outcomes name, each in one change, as Report.Record writes them. Only
// the numbers were held to each other, so one call could be both
// unchanged and failed, and a change could name a call no outcome names
// (one not replayed) or a call another change named.
func TestParseRecordCallsOnce(t *testing.T) {
	base, err := log.ParseEntry(goldenEntries(t)["entry-definition-changed.json"])
	if err != nil {
		t.Fatal(err)
	}
	const then, now = `"tool_sha256_then":"87d8664d2c6f100c76582ebf33a550a0cf726ed68faf95217d7b65c97a3bbaba"`, `"tool_sha256_now":"04dd90397d93ab3d0f082e74e44329546a66652c01a95fed847de7c7559a74ef"`
	change := func(tool, calls string) string {
		return `{"calls":"` + calls + `","server":"fx","tool":"` + tool + `",` + then + `,` + now + `}`
	}
	// Calls 2 and 3, in two classes, both made under a changed definition.
	const adjacent = `"outcomes":{"unchanged":"2","failed":"3"},"counts":{"changed":0,"failed":1,"flaky":0,"not_replayable":0,"unchanged":1},"definitions":{"changed":2,"gone":0,"same":0,"unknown":0}`
	for _, c := range []struct{ name, fields, words string }{
		{"a change of calls of two classes", adjacent + `,"definition_changes":[` + change("stable", "2-3") + `]`, ""},
		{"a call in two classes", `"outcomes":{"unchanged":"2,4","failed":"3-4"},"counts":{"changed":0,"failed":2,"flaky":0,"not_replayable":0,"unchanged":2}`, "outcomes name call 4 twice"},
		{"a change of a call not replayed", `"definition_changes":[` + change("stable", "3") + `]`, "definition_changes[0].calls: call 3 is named by no outcome"},
		{"a change past the calls replayed", adjacent + `,"definition_changes":[` + change("stable", "2-4") + `]`, "definition_changes[0].calls: call 4 is named by no outcome"},
		{"a call in two changes", `"definitions":{"changed":2,"gone":0,"same":0,"unknown":0},"definition_changes":[` + change("stable", "2") + `,` + change("other", "2") + `]`, "definition_changes name call 2 twice"},
	} {
		e := &log.Entry{Kind: KindReplay, Time: base.Time, Actor: base.Actor, Fields: map[string]any{}}
		for k, v := range base.Fields {
			e.Fields[k] = v
		}
		if err := json.Unmarshal([]byte("{"+c.fields+"}"), &e.Fields); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := ParseRecord(e); c.words == "" && err != nil {
			t.Errorf("%s: ParseRecord: %v", c.name, err)
		} else if c.words != "" && (err == nil || !strings.Contains(err.Error(), c.words)) {
			t.Errorf("%s: ParseRecord: %v, want an error saying %q", c.name, err, c.words)
		}
	}
}
