package bundle_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// TestProvResultForm: a result entity says how its provlog:sha256 was
// taken exactly when its entry does (provlog:canonical false: the result
// was not I-JSON and the bytes as received were hashed;
// provlog:remarshalled true: the SDK's re-encoding was), for call.result
// entries and the outcome of an old one-entry call alike. An auditor
// holding a result and only the document finds its hash, even for one
// JCS refuses (a lone surrogate). python3-prov reads the attributes.
func TestProvResultForm(t *testing.T) {
	f := newFixture(t, 0, false)
	ctx := context.Background()
	now := time.Now()
	// Results as a server sent them: one JCS refuses, and one it
	// reorders, whose hash is over the reordered form.
	lone := []byte(`{"content":[{"type":"text","text":"\ud800"}]}`)
	if _, err := log.Canonicalize(lone); err == nil {
		t.Fatal("JCS took a lone surrogate: the raw case is not raw")
	}
	loose := []byte(`{"structuredContent":{"b":1,"a":2}}`)
	looseJCS, err := log.Canonicalize(loose)
	if err != nil {
		t.Fatal(err)
	}
	appendEntry := func(b []byte, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		r, err := f.seq.Append(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return r.Index
	}
	type resultCase struct {
		result              []byte // the result as the server sent it
		canonical, remarsh  any    // the attributes, nil when absent
		raw, remarshalled   bool
		retained, oneEntry  bool
		callIndex, resIndex uint64
	}
	cases := []*resultCase{
		{result: loose},
		{result: lone, canonical: false, raw: true},
		{result: loose, remarsh: true, remarshalled: true},
		{result: lone, canonical: false, remarsh: true, raw: true, remarshalled: true, retained: true},
		{result: lone, canonical: false, raw: true, oneEntry: true},
	}
	for _, c := range cases {
		sum := sha256hex(looseJCS)
		if c.raw {
			sum = sha256hex(c.result)
		}
		if c.oneEntry {
			// A log from before call.result: the outcome is in the call.
			c.callIndex = appendEntry((&log.Entry{Kind: log.KindCall, Time: now, Actor: "bob", Fields: map[string]any{
				"server": "s", "tool": "t", "args": map[string]any{}, "started": now.UTC().Format(log.TimeFormat), "is_error": false,
				"duration_ns": 5, "result_sha256": sum, "result_bytes": len(c.result), "result_canonical": false}}).Marshal())
			continue
		}
		c.callIndex = appendEntry((&log.CallEntry{Time: now, Actor: "bob", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal())
		c.resIndex = appendEntry((&log.CallResultEntry{Time: now, Actor: "bob", Call: c.callIndex, ResultSHA256: sum, ResultBytes: int64(len(c.result)),
			ResultRaw: c.raw, ResultRemarshalled: c.remarshalled, ResultRetained: c.retained, Duration: 5}).Marshal())
	}

	dir := f.export(t, 0, 0)
	rep, err := bundle.Verify(ctx, dir, anchor.VerifyBundled)
	if err != nil || rep.Manifest.ProvMapping != bundle.ProvMapping {
		t.Fatalf("verify: %+v, %v; want mapping %d", rep, err, bundle.ProvMapping)
	}
	doc := readProv(t, dir)
	var pyWant []string
	for _, c := range cases {
		id := "log:entry/" + strconv.FormatUint(c.callIndex, 10) + "/result"
		ent := doc["entity"][id]
		if ent == nil {
			t.Fatalf("no result entity %s", id)
		}
		canonical, hasC := ent["provlog:canonical"]
		remarsh, hasR := ent["provlog:remarshalled"]
		if !hasC {
			canonical = nil
		}
		if !hasR {
			remarsh = nil
		}
		if canonical != c.canonical || remarsh != c.remarsh {
			t.Errorf("%s: provlog:canonical %v, provlog:remarshalled %v; want %v, %v", id, canonical, remarsh, c.canonical, c.remarsh)
		}
		if got, want := auditorSum(t, ent, c.result), ent["provlog:sha256"]; got != want {
			t.Errorf("%s: hashing the result as the document says gives %s, not its provlog:sha256 %s", id, got, want)
		}
		pyWant = append(pyWant, fmt.Sprintf("%s %v %v", id, pyValue(c.canonical), pyValue(c.remarsh)))
	}

	t.Run("python3-prov", func(t *testing.T) {
		conv := needPythonProv(t)
		doc := filepath.Join(dir, bundle.ProvFile)
		provRoundTrip(t, conv, doc)
		out := pythonProv(t, `
for e in d.get_records(prov.model.ProvEntity):
    if str(e.identifier).endswith("/result"):
        print(e.identifier, list(e.get_attribute("provlog:canonical")), list(e.get_attribute("provlog:remarshalled")))
`, doc)
		if got, w := sortLines(string(out)), sortLines(strings.Join(pyWant, "\n")+"\n"); got != w {
			t.Errorf("python3-prov read the result entities as\n%s\nwant\n%s", got, w)
		}
	})
}

// auditorSum is what an auditor computes from a result and its entity:
// the SHA-256 of the bytes as received when the entity says the result
// was not canonical, else of their JCS form.
func auditorSum(t *testing.T, ent map[string]any, result []byte) string {
	t.Helper()
	if ent["provlog:canonical"] == false {
		return sha256hex(result)
	}
	c, err := log.Canonicalize(result)
	if err != nil {
		t.Fatalf("the document says the result was canonical, and JCS refuses it: %v", err)
	}
	return sha256hex(c)
}

// pyValue is how python3-prov prints an attribute's values.
func pyValue(v any) string {
	switch v {
	case nil:
		return "[]"
	case true:
		return "[True]"
	}
	return "[False]"
}
