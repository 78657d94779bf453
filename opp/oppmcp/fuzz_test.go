package oppmcp

import (
	"encoding/json"
	"testing"
)

// FuzzDecode feeds arbitrary arguments to the strict decoder of every tool.
// It must never panic; what it accepts holds only the tool's own arguments,
// with the declared types.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"task_id":"t_00000000000000000000000000000000"}`,
		`{"task_id":"x","provenance":["observed"],"summary":"s"}`,
		`{"task_id":"x","provenance":"observed","summary":"s","evidence":[1,2,3]}`,
		`{"evidence":[-1,1.5,"2",1e3]}`, `{"title":"a","title":"b"}`, `{"title":"\ud800"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, d := range tools {
			a, err := decode(d.params, json.RawMessage(raw))
			if err != nil {
				continue
			}
			for k := range a.s {
				if !hasParam(d.params, k, "string") {
					t.Fatalf("%s: accepted string %q it does not take", d.name, k)
				}
			}
			for k := range a.ix {
				if !hasParam(d.params, k, "indices") {
					t.Fatalf("%s: accepted indices %q it does not take", d.name, k)
				}
			}
		}
	})
}

func hasParam(ps []param, name, kind string) bool {
	for _, p := range ps {
		if p.name == name && p.kind == kind {
			return true
		}
	}
	return false
}
