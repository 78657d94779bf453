package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// goldenEntries are replay entries as the code before Record wrote them
// (testdata): by provlog replay --data (entry-run, with ignore lists;
// entry-definition-changed and -gone), through record_replay
// (entry-remote), fitted to the entry size limit (entry-fitted), and as
// the first replay code wrote them, without definitions (entry-88a067c).
func goldenEntries(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "entry-*.json"))
	if err != nil || len(paths) != 6 {
		t.Fatalf("golden entries %v: %v", paths, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestParseRecordGolden: every replay entry today's logs hold parses, and
// Marshal writes it again byte for byte.
func TestParseRecordGolden(t *testing.T) {
	for name, b := range goldenEntries(t) {
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := ParseRecord(e)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, err := r.Marshal()
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: Marshal(Parse) = %s, %v\nwant %s", name, got, err, b)
		}
	}
	e, _ := log.ParseEntry(goldenEntries(t)["entry-fitted.json"])
	r, _ := ParseRecord(e)
	if r.Outcomes != nil || r.OutcomesSHA256 == "" || r.DefinitionChanges != nil || r.DefinitionChangesSHA256 == "" {
		t.Errorf("fitted entry read as %+v", r)
	}
}

// TestRecordRoundTrip: what Report.Record makes of a run is what
// ParseRecord reads from its entry.
func TestRecordRoundTrip(t *testing.T) {
	then, now := strings.Repeat("a", 64), strings.Repeat("b", 64)
	rep := &Report{From: 10, To: 30, Runs: 2, Counts: map[string]int{}, Definitions: map[string]int{}}
	for _, c := range Classes {
		rep.Counts[c] = 0
	}
	for _, d := range Definitions {
		rep.Definitions[d] = 0
	}
	add := func(i uint64, class, def, toolNow string) {
		rep.Counts[class]++
		rep.Definitions[def]++
		rep.Outcomes = append(rep.Outcomes, Outcome{Index: i, Server: "s", Tool: "t", Class: class, Definition: def, ToolThen: then, ToolNow: toolNow})
	}
	add(10, Unchanged, DefinitionSame, then)
	add(11, Unchanged, DefinitionChanged, now)
	add(12, Flaky, DefinitionChanged, now)
	add(20, Failed, DefinitionGone, "")
	add(29, NotReplayable, DefinitionSame, then)
	auth := &log.Auth{Issuer: "https://idp.example", Subject: "u1", TokenSHA256: strings.Repeat("c", 64), Via: log.AuthViaJWT}
	r := rep.Record("alice", time.Date(2026, 12, 6, 14, 0, 0, 5, time.UTC), nil)
	r.Auth = auth
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRecord(e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	want := map[string]string{Unchanged: "10-11", Flaky: "12", Failed: "20", NotReplayable: "29"}
	if !reflect.DeepEqual(got.Outcomes, want) || len(got.DefinitionChanges) != 2 || got.DefinitionChanges[0].Calls != "11-12" || got.IgnoreSHA256 != "" {
		t.Errorf("record %+v, want outcomes %v and two definition changes", got, want)
	}
}

// TestParseRecordRefuses: a record Report.Record could not have made is
// refused, and Marshal refuses to write it.
func TestParseRecordRefuses(t *testing.T) {
	base, err := log.ParseEntry(goldenEntries(t)["entry-definition-changed.json"])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, fields string // the golden members, with these replaced
		words        string
	}{
		{"kind", ``, ""},
		{"unknown member", `"extra":1`, `unexpected field "extra"`},
		{"range without to", `"range":{"from":0}`, "range must hold from and to"},
		{"range past 2^53", `"range":{"from":0,"to":9007199254740994}`, "past 2^53"},
		{"runs zero", `"runs":0`, "runs is 0"},
		{"runs fractional", `"runs":1.5`, "where an integer belongs"},
		{"counts too many", `"counts":{"unchanged":7}`, "add up to more than 6"},
		{"both outcomes forms", `"outcomes_sha256":"` + strings.Repeat("0", 64) + `"`, "exactly one of outcomes"},
		{"sha256 upper case", `"ignore_sha256":"` + strings.Repeat("A", 64) + `"`, "ignore_sha256 is not"},
		{"sha256 short", `"outcomes_sha256":"abc"`, "outcomes_sha256 is not"},
		{"outcome class unknown", `"outcomes":{"odd":"2,4"}`, "no such class"},
		{"outcome empty", `"outcomes":{"unchanged":""},"counts":{"unchanged":0}`, "empty"},
		{"outcome leading zero", `"outcomes":{"unchanged":"02,4"}`, "not a log index"},
		{"outcome joinable", `"outcomes":{"unchanged":"2,3"}`, "joins the run before it"},
		{"outcome descending", `"outcomes":{"unchanged":"4,2"}`, "out of order"},
		{"outcome run backwards", `"outcomes":{"unchanged":"4-2"}`, "does not ascend"},
		{"outcome missing for a count", `"outcomes":{},"counts":{"unchanged":2}`, "outcomes names none"},
		{"definitions unknown", `"definitions":{"changed":1,"same":1,"odd":0}`, "definitions.odd: unknown"},
		{"definitions over the calls", `"definitions":{"changed":1,"same":2}`, "add up to more than 2"},
		{"changes empty", `"definition_changes":[]`, "is empty"},
		{"change without now", `"definition_changes":[{"calls":"2","server":"fx","tool":"stable","tool_sha256_then":"` + strings.Repeat("a", 64) + `"}]`, `has no "tool_sha256_now"`},
		{"change that is none", `"definition_changes":[{"calls":"2","server":"fx","tool":"stable","tool_sha256_now":"` + strings.Repeat("a", 64) + `","tool_sha256_then":"` + strings.Repeat("a", 64) + `"}]`, "are no change"},
		{"change both forms", `"definition_changes_sha256":"` + strings.Repeat("0", 64) + `"`, "both set"},
		{"changes without definitions", `"definitions":null`, "definitions is null"},
	} {
		e := &log.Entry{Kind: KindReplay, Time: base.Time, Actor: base.Actor, Fields: map[string]any{}}
		for k, v := range base.Fields {
			e.Fields[k] = v
		}
		if c.name == "kind" {
			e.Kind = "replayed"
		} else if err := json.Unmarshal([]byte("{"+c.fields+"}"), &e.Fields); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := ParseRecord(e)
		if err == nil || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: ParseRecord: %v, want an error saying %q", c.name, err, c.words)
		}
	}
	// Marshal holds a record to the same rules.
	r, err := ParseRecord(base)
	if err != nil {
		t.Fatal(err)
	}
	r.Counts["flaky"] = -1
	if _, err := r.Marshal(); err == nil || !strings.Contains(err.Error(), "below zero") {
		t.Errorf("Marshal of a negative count: %v", err)
	}
}

// TestCountRanges holds readRanges to Ranges: it reads what Ranges
// writes and counts the indices.
func TestCountRanges(t *testing.T) {
	for _, idx := range [][]uint64{{0}, {5, 6, 7}, {1, 3, 5}, {1, 2, 4, 5, 6, 9}, {maxInt - 1}} {
		s := Ranges(append([]uint64(nil), idx...))
		_, n, err := readRanges(s, 0, maxInt)
		if err != nil || n != uint64(len(idx)) {
			t.Errorf("readRanges(%q) = %d, %v; want %d", s, n, err, len(idx))
		}
	}
	for _, s := range []string{",", "1,", "-1", "1-", "1--2", "+1", "1 ", "1,1", "1-3,3", "1-3,4", "18446744073709551616"} {
		if _, _, err := readRanges(s, 0, maxInt); err == nil {
			t.Errorf("readRanges(%q) accepted", s)
		}
	}
}

// FuzzParseRecord holds ParseRecord to Marshal: a record it reads from
// any members, or from any entry bytes, writes an entry that reads back
// as the same record and writes the same bytes again.
func FuzzParseRecord(f *testing.F) {
	for _, b := range goldenEntries(f) {
		e, err := log.ParseEntry(b)
		if err != nil {
			f.Fatal(err)
		}
		fields, _ := json.Marshal(e.Fields)
		f.Add(fields)
		f.Add(b)
	}
	f.Add([]byte(`{"range":{"from":0,"to":0},"runs":1,"counts":{},"outcomes":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r *Record
		if e, err := log.ParseEntry(b); err == nil {
			r, _ = ParseRecord(e)
		}
		if r == nil {
			var fields map[string]any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if dec.Decode(&fields) != nil {
				return
			}
			var err error
			if r, err = ParseRecord(&log.Entry{Kind: KindReplay, Time: time.Unix(1, 0).UTC(), Actor: "a", Fields: fields}); err != nil {
				return
			}
		}
		b1, err := r.Marshal()
		if err != nil {
			t.Fatalf("a parsed record does not marshal: %v (%+v)", err, r)
		}
		e, err := log.ParseEntry(b1)
		if err != nil {
			t.Fatalf("marshaled record: %v: %s", err, b1)
		}
		r2, err := ParseRecord(e)
		if err != nil {
			t.Fatalf("a marshaled record does not parse: %v: %s", err, b1)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip:\n %+v\n %+v", r, r2)
		}
		if b2, err := r2.Marshal(); err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("written again: %s, %v; want %s", b2, err, b1)
		}
	})
}
