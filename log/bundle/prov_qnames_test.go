package bundle

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// provnQName is a PROV-N qualified name (W3C PROV-N, QUALIFIED_NAME and
// PN_LOCAL, ASCII): PROV-JSON writes qualified names as PROV-N does. A
// local part may not end in ".".
var provnQName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*:` +
	`(?:(?:[A-Za-z0-9_/@~&+*?#$!]|%[0-9A-Fa-f]{2})(?:(?:[A-Za-z0-9_./@~&+*?#$!-]|%[0-9A-Fa-f]{2})*(?:[A-Za-z0-9_/@~&+*?#$!-]|%[0-9A-Fa-f]{2}))?)$`)

// TestProvQualifiedNames: every id the PROV document writes is a PROV-N
// qualified name, whatever the names it is made of. An actor, a server or
// a client's version may end in "." ("alice.", "fs.", "2."), and local
// kept the dot: log:actor/alice. is no PROV-N name (a local part ends in
// no "."), so a PROV-N or PROV-JSON reader that holds to the grammar
// refuses the document (before: 3 such ids, written in 6 places, for a
// call by "alice." of server "fs." from a client of version "2.").
func TestProvQualifiedNames(t *testing.T) {
	w, err := newProvWriter("provlog.example/l", ProvMapping)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	b, err := (&log.CallEntry{Time: at, Actor: "alice.", Server: "fs.", Tool: "read.", Args: log.CanonicalJSON(`{}`),
		Client: &log.CallClient{Name: "agent.", Version: "2."}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	w.add(1, b, e)
	var doc bytes.Buffer
	if err := w.finish(&doc); err != nil {
		t.Fatal(err)
	}
	var d map[string]json.RawMessage
	if err := json.Unmarshal(doc.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, g := range groups {
		var recs map[string]map[string]any
		if d[g] == nil {
			continue
		}
		if err := json.Unmarshal(d[g], &recs); err != nil {
			t.Fatal(err)
		}
		for id, attrs := range recs {
			if !strings.HasPrefix(id, "_:") && !provnQName.MatchString(id) {
				bad = append(bad, id)
			}
			for k, v := range attrs {
				s, ok := v.(string)
				switch k {
				case "prov:label", "prov:value", "prov:time", "prov:startTime", "prov:endTime":
					continue
				}
				if ok && strings.HasPrefix(k, "prov:") && !provnQName.MatchString(s) {
					bad = append(bad, g+"."+k+"="+s)
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("the PROV document writes %d ids that are no PROV-N qualified names: %q", len(bad), bad)
	}
}
