package log_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

func TestCallEntriesRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC)
	c := &log.CallEntry{
		Time: at, Actor: "alice", Server: "ev", Tool: "echo",
		ToolSHA256:      strings.Repeat("ab", 32),
		Args:            log.CanonicalJSON(`{"message":"[redacted]","n":1e+21}`),
		Client:          &log.CallClient{Name: "cl", Version: "1.0"},
		ProtocolVersion: "2025-11-25",
		Continues:       5, InputResponsesSHA256: strings.Repeat("ef", 32),
	}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"alice","args":{"message":"[redacted]","n":1e+21},"client":{"name":"cl","version":"1.0"},"continues":5,"input_responses_sha256":"` + strings.Repeat("ef", 32) + `","kind":"call","protocol_version":"2025-11-25","server":"ev","started":"2026-12-01T09:00:00.123456789Z","time":"2026-12-01T09:00:00.123456789Z","tool":"echo","tool_sha256":"` + strings.Repeat("ab", 32) + `","v":1}`
	if string(b) != want {
		t.Errorf("call entry\n got %s\nwant %s", b, want)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := log.ParseCall(e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("ParseCall\n got %+v\nwant %+v", got, c)
	}

	r := &log.CallResultEntry{
		Time: at.Add(time.Second), Actor: "alice", Call: 7,
		ResultSHA256: strings.Repeat("cd", 32), ResultBytes: 42, ResultRetained: true,
		IsError: true, Error: "boom", ErrorCode: -32001, DataRelease: "v1", Duration: time.Second,
	}
	b, err = r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if e, err = log.ParseEntry(b); err != nil {
		t.Fatal(err)
	}
	gotR, err := log.ParseCallResult(e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotR, r) {
		t.Errorf("ParseCallResult\n got %+v\nwant %+v", gotR, r)
	}
}

func TestCallMarshalRefuses(t *testing.T) {
	base := log.CallEntry{Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}
	for name, c := range map[string]log.CallEntry{
		"no server":     {Tool: "t", Args: base.Args},
		"no args":       {Server: "s", Tool: "t"},
		"both args":     {Server: "s", Tool: "t", Args: base.Args, ArgsSHA256: "00"},
		"with outcome":  {Server: "s", Tool: "t", Args: base.Args, Outcome: &log.CallResultEntry{}},
		"non-canonical": {Server: "s", Tool: "t", Args: log.CanonicalJSON(`{"a":1e999}`)},
	} {
		b, err := c.Marshal()
		if err == nil {
			if _, perr := log.ParseEntry(b); perr == nil {
				t.Errorf("%s: Marshal made a valid entry", name)
			}
		}
	}
}

// A call entry of the one-entry form (logs written before call.result)
// still reads, outcome included.
func TestParseLegacyCall(t *testing.T) {
	legacy := `{"actor":"alice","args":{"message":"hi"},"duration_ns":1500,"is_error":false,"kind":"call","result_bytes":12,"result_sha256":"` + strings.Repeat("0f", 32) + `","server":"ev","started":"2026-01-02T03:04:05.000000000Z","time":"2026-01-02T03:04:05.000000000Z","tool":"echo","v":1}`
	e, err := log.ParseEntry([]byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	c, err := log.ParseCall(e)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outcome == nil || c.Outcome.ResultBytes != 12 || c.Outcome.Duration != 1500 || c.Outcome.ResultSHA256 != strings.Repeat("0f", 32) {
		t.Fatalf("legacy outcome = %+v", c.Outcome)
	}
	if string(c.Args) != `{"message":"hi"}` {
		t.Errorf("args = %s", c.Args)
	}
}

// TestParseCallResultRefuses: a call.result entry, or the outcome in a
// call entry of the one-entry form, that provlog could not have written
// does not parse.
func TestParseCallResultRefuses(t *testing.T) {
	for _, fields := range []string{
		`"is_error":false`,            // no call
		`"call":-1,"is_error":false`,  // negative index
		`"call":"3","is_error":false`, // not a number
		`"call":3,"is_error":"false"`, // not a boolean
		`"call":3,"duration_ns":1.5`,  // not an integer
		`"call":3,"result_sha256":1`,  // not a string
		// The form markers hold one value each; the other is never
		// written and would make one hash claim two forms.
		`"call":3,"result_canonical":true`,
		`"call":3,"result_canonical":"false"`,
		`"call":3,"result_remarshalled":false`,
		`"call":3,"result_remarshalled":null`,
		// result_retained is a marker too: only true was ever written.
		`"call":3,"result_retained":false`,
		`"call":3,"result_retained":"true"`,
	} {
		b := `{"actor":"a",` + fields + `,"kind":"call.result","time":"2026-01-02T03:04:05.000000000Z","v":1}`
		if _, err := log.ParseCallResult(canonicalEntry(t, b)); err == nil {
			t.Errorf("%s: parsed", fields)
		}
	}
	for _, member := range []string{`"result_retained":false`, `"result_canonical":true`, `"result_remarshalled":false`} {
		b := `{"actor":"a","args":{},"duration_ns":1,"is_error":false,"kind":"call",` + member + `,"result_bytes":2,"result_sha256":"ab","server":"s","started":"2026-01-02T03:04:05.000000000Z","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`
		if c, err := log.ParseCall(canonicalEntry(t, b)); err == nil {
			t.Errorf("a one-entry call with %s: parsed, outcome %+v", member, c.Outcome)
		}
	}
}

// canonicalEntry parses the canonical form of entry text b.
func canonicalEntry(t *testing.T, b string) *log.Entry {
	t.Helper()
	c, err := log.Canonicalize([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestReadEntryResultForm: a read entry says how its result_sha256 was
// taken as a call.result does (result_canonical: false, result_remarshalled:
// true), both survive a round trip, a plain read carries neither, an entry
// written before the markers still reads, and the markers' other values
// are refused.
func TestReadEntryResultForm(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	sum := strings.Repeat("cd", 32)
	for _, r := range []*log.ReadEntry{
		{Kind: log.KindResourceRead, Time: at, Actor: "a", Server: "s", URI: "file:///x", ResultSHA256: sum, ResultBytes: 9, ResultRaw: true},
		{Kind: log.KindPromptGet, Time: at, Actor: "a", Server: "s", Prompt: "p", Args: log.CanonicalJSON(`{}`), ResultSHA256: sum, ResultBytes: 9,
			ResultRaw: true, ResultRemarshalled: true},
		{Kind: log.KindResourceRead, Time: at, Actor: "a", Server: "s", URI: "file:///x", ResultSHA256: sum, ResultBytes: 9},
	} {
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]bool{`"result_canonical":false`: r.ResultRaw, `"result_remarshalled":true`: r.ResultRemarshalled} {
			if got := bytes.Contains(b, []byte(k)); got != want {
				t.Errorf("%s: has %s: %v, want %v", b, k, got, want)
			}
		}
		if bytes.Contains(b, []byte(`"result_canonical":true`)) || bytes.Contains(b, []byte(`"result_remarshalled":false`)) {
			t.Errorf("%s: a marker with its other value", b)
		}
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := log.ParseRead(e)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("ParseRead\n got %+v\nwant %+v", got, r)
		}
	}

	const old = `{"actor":"a","kind":"resource.read","result_bytes":9,"result_sha256":"` + "ab" + `","server":"s","time":"2026-01-02T03:04:05.000000000Z","uri":"u","v":1}`
	e, err := log.ParseEntry([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := log.ParseRead(e); err != nil || r.ResultRaw || r.ResultRemarshalled || r.ResultSHA256 != "ab" {
		t.Errorf("an entry from before the markers: %+v, %v", r, err)
	}

	for _, member := range []string{`"result_canonical":true`, `"result_canonical":"false"`, `"result_remarshalled":false`, `"result_remarshalled":0`} {
		for _, kind := range []string{log.KindResourceRead, log.KindPromptGet} {
			b := `{"actor":"a","kind":"` + kind + `",` + member + `,"result_bytes":9,"result_sha256":"ab","server":"s","time":"2026-01-02T03:04:05.000000000Z","v":1}`
			c, err := log.Canonicalize([]byte(b))
			if err != nil {
				t.Fatal(err)
			}
			e, err := log.ParseEntry(c)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := log.ParseRead(e); err == nil {
				t.Errorf("%s %s: parsed as %+v", kind, member, r)
			}
		}
	}
}

// auditLog is an AuditSource holding entries and one checkpoint over them.
type auditLog struct {
	entries [][]byte
	cp      []byte
}

func (a *auditLog) Entries(_ context.Context, start, end uint64) ([][]byte, error) {
	return a.entries[start:end], nil
}

func (a *auditLog) Checkpoints(_ context.Context, _ uint64, fn func(uint64, []byte) error) error {
	return fn(uint64(len(a.entries)), a.cp)
}

func newAuditLog(t *testing.T, entries [][]byte) (*auditLog, note.Verifier) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "provlog.test/audit")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	gen, err := log.Genesis(time.Now(), "provlog.test/audit", vkey, nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	entries = append([][]byte{gen}, entries...)
	rng := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0)
	for _, e := range entries {
		rng.Append(log.LeafHash(e), nil)
	}
	root, _ := rng.GetRootHash(nil)
	cp, err := log.SignCheckpoint(log.Checkpoint{Origin: "provlog.test/audit", Size: uint64(len(entries)), Hash: root}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return &auditLog{entries: entries, cp: cp}, v
}

func TestAuditPairsCallsWithResults(t *testing.T) {
	now := time.Now()
	call := func(actor string) []byte {
		b, err := (&log.CallEntry{Time: now, Actor: actor, Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	result := func(actor string, i uint64) []byte {
		b, err := (&log.CallResultEntry{Time: now, Actor: actor, Call: i, ResultSHA256: strings.Repeat("ab", 32)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	leg := func(actor string, continues uint64) []byte {
		b, err := (&log.CallEntry{Time: now, Actor: actor, Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`), Continues: continues}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A call of an old log: one entry, outcome included.
	legacy := []byte(`{"actor":"a","args":{},"duration_ns":5,"is_error":false,"kind":"call","server":"s","started":"2026-01-02T03:04:05.000000000Z","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`)
	// Entry 0 is the genesis; the calls are at 1, 2, 4, 5 and 6.
	// Entry 6 is a later leg of the call at 1, continuing its result at 3.
	src, v := newAuditLog(t, [][]byte{call("a"), call("b"), result("a", 1), call("a"), legacy, leg("a", 3)})
	rep, err := log.Audit(context.Background(), src, v, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 5 || !reflect.DeepEqual(rep.OpenCalls, []uint64{2, 4, 6}) {
		t.Errorf("calls %d, open %v; want 5, [2 4 6]", rep.Calls, rep.OpenCalls)
	}

	for _, tc := range []struct {
		name    string
		entries [][]byte
		part    string // the entry the audit names
	}{
		{"result for a later entry", [][]byte{result("a", 2), call("a")}, "entry 1"},
		{"result for a non-call", [][]byte{call("a"), result("a", 0)}, "entry 2"},
		{"two results", [][]byte{call("a"), result("a", 1), result("a", 1)}, "entry 3"},
		{"other actor", [][]byte{call("a"), result("b", 1)}, "entry 2"},
		{"result for an old call", [][]byte{legacy, result("a", 1)}, "entry 2"},
		{"continues a later entry", [][]byte{call("a"), result("a", 1), leg("a", 3)}, "entry 3"},
	} {
		src, v := newAuditLog(t, tc.entries)
		_, err := log.Audit(context.Background(), src, v, "")
		var pe *log.ProblemsError
		if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Part != tc.part {
			t.Errorf("%s: audit said %v, want one problem of %s", tc.name, err, tc.part)
		}
	}
}

// TestAuditProblems: what an audit finds wrong is a *log.ProblemsError
// naming the entry or checkpoint; a source it cannot read is another
// error, since the audit found nothing wrong, it could not look.
func TestAuditProblems(t *testing.T) {
	call, err := (&log.CallEntry{Time: time.Now(), Actor: "a", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(a *auditLog)
		part   string
	}{
		{"entry changed", func(a *auditLog) { a.entries[1] = bytes.Replace(a.entries[1], []byte(`"t"`), []byte(`"u"`), 1) }, "checkpoint 2"},
		{"entry not JSON", func(a *auditLog) { a.entries[1] = []byte("{") }, "entry 1"},
		{"genesis missing", func(a *auditLog) { a.entries[0] = call }, "entry 0"},
		{"checkpoint signature", func(a *auditLog) { a.cp = bytes.Replace(a.cp, []byte("/audit\n2\n"), []byte("/audit\n2 \n"), 1) }, "checkpoint 2"},
	} {
		src, v := newAuditLog(t, [][]byte{call})
		tc.change(src)
		_, err := log.Audit(ctx, src, v, "")
		var pe *log.ProblemsError
		if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Part != tc.part {
			t.Errorf("%s: audit said %v, want one problem of %s", tc.name, err, tc.part)
		}
	}
	src, v := newAuditLog(t, [][]byte{call})
	_, err = log.Audit(ctx, failingSource{src}, v, "")
	var pe *log.ProblemsError
	if err == nil || errors.As(err, &pe) || !errors.Is(err, errUnreadable) {
		t.Errorf("unreadable source: audit said %v, want the read error", err)
	}
}

var errUnreadable = errors.New("unreadable")

// failingSource serves the checkpoint but cannot read entries.
type failingSource struct{ *auditLog }

func (failingSource) Entries(context.Context, uint64, uint64) ([][]byte, error) {
	return nil, errUnreadable
}

// FuzzParseCallEntries reads entry bytes as call and call.result entries
// (what audit, replay and the bundle's PROV export do with untrusted
// logs): never a panic, and what parses marshals back to an entry that
// parses to the same value.
func FuzzParseCallEntries(f *testing.F) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c, _ := (&log.CallEntry{Time: at, Actor: "a", Server: "s", Tool: "t", Args: log.CanonicalJSON(`{"x":[1,"y"]}`), Client: &log.CallClient{Name: "n"}}).Marshal()
	r, _ := (&log.CallResultEntry{Time: at, Actor: "a", Call: 3, ResultSHA256: "ab", ResultBytes: 9, ResultRaw: true, Error: "e", ErrorCode: -1}).Marshal()
	tl, _ := (&log.ToolsEntry{Time: at, Actor: "provlog", Server: "s", Tools: []log.ToolSum{{Name: "a", SHA256: "00"}}}).Marshal()
	rr, _ := (&log.ReadEntry{Kind: log.KindPromptGet, Time: at, Actor: "a", Server: "s", Prompt: "p", Args: log.CanonicalJSON(`{"k":"v"}`), ResultSHA256: "ab"}).Marshal()
	f.Add(c)
	f.Add(r)
	tp, _ := (&log.ToolsEntry{Time: at, Actor: "provlog", Server: "s", Tools: []log.ToolSum{{Name: "b", SHA256: "01"}}, Part: 2, Parts: 3}).Marshal()
	f.Add(tl)
	f.Add(tp)
	rb, _ := (&log.ReadEntry{Kind: log.KindPromptGet, Time: at, Actor: "a", Server: "s", Prompt: "p", ArgsSHA256: "cd", ResultSHA256: "ab"}).Marshal()
	rm, _ := (&log.ReadEntry{Kind: log.KindResourceRead, Time: at, Actor: "a", Server: "s", URI: "u", ResultSHA256: "ab", ResultRaw: true, ResultRemarshalled: true}).Marshal()
	rk, _ := (&log.CallResultEntry{Time: at, Actor: "a", Call: 3, ResultSHA256: "ab", ResultBytes: 9, ResultRetained: true, RetainedSHA256: "cd"}).Marshal()
	f.Add(rk)
	f.Add(bytes.Replace(rk, []byte(`"result_retained":true`), []byte(`"result_retained":false`), 1)) // refused
	f.Add(rr)
	f.Add(rb)
	f.Add(rm)
	f.Add([]byte(`{"actor":"a","args":{},"duration_ns":1,"is_error":true,"kind":"call","server":"s","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`))
	f.Add([]byte(`{"actor":"a","call":18446744073709551615,"kind":"call.result","time":"2026-01-02T03:04:05.000000000Z","v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := log.ParseEntry(b)
		if err != nil {
			return
		}
		switch e.Kind {
		case log.KindCall:
			c, err := log.ParseCall(e)
			if err != nil || c.Outcome != nil || c.Args == nil && c.ArgsSHA256 == "" || c.Args != nil && c.ArgsSHA256 != "" {
				return
			}
			b2, err := c.Marshal()
			if err != nil {
				return // e.g. over the size limit once re-encoded
			}
			e2, err := log.ParseEntry(b2)
			if err != nil {
				t.Fatalf("a parsed call marshals to an entry that does not parse: %v\n%s", err, b2)
			}
			c2, err := log.ParseCall(e2)
			if err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("call round trip: %+v\n%+v (%v)", c, c2, err)
			}
		case log.KindTools:
			if tl, err := log.ParseTools(e); err == nil {
				if b2, err := tl.Marshal(); err == nil {
					if e2, err := log.ParseEntry(b2); err != nil {
						t.Fatalf("a parsed tools entry marshals to one that does not parse: %v", err)
					} else if tl2, err := log.ParseTools(e2); err != nil || !reflect.DeepEqual(tl, tl2) {
						t.Fatalf("tools round trip: %+v\n%+v (%v)", tl, tl2, err)
					}
				}
			}
		case log.KindResourceRead, log.KindPromptGet:
			if rd, err := log.ParseRead(e); err == nil {
				if b2, err := rd.Marshal(); err == nil {
					e2, err := log.ParseEntry(b2)
					if err != nil {
						t.Fatalf("a parsed %s entry marshals to one that does not parse: %v", e.Kind, err)
					}
					rd2, err := log.ParseRead(e2)
					if err != nil || rd2.ResultSHA256 != rd.ResultSHA256 || rd2.ResultRaw != rd.ResultRaw || rd2.ResultRemarshalled != rd.ResultRemarshalled {
						t.Fatalf("%s round trip of the result's hash and form: %+v\n%+v (%v)", e.Kind, rd, rd2, err)
					}
				}
			}
		case log.KindCallResult:
			r, err := log.ParseCallResult(e)
			if err != nil {
				return
			}
			b2, err := r.Marshal()
			if err != nil {
				return
			}
			e2, err := log.ParseEntry(b2)
			if err != nil {
				t.Fatalf("a parsed call.result marshals to an entry that does not parse: %v\n%s", err, b2)
			}
			r2, err := log.ParseCallResult(e2)
			if err != nil || !reflect.DeepEqual(r, r2) {
				t.Fatalf("call.result round trip: %+v\n%+v (%v)", r, r2, err)
			}
		}
	})
}

// TestToolsEntryParts: a tool list too large for one entry is written as
// parts, each within the entry limit, that read back (in order) as the
// whole list; a small list stays one entry without part numbers; a tool
// that cannot fit alone is an error naming it; bad part numbers are
// refused.
func TestToolsEntryParts(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	list := func(n int, name func(int) string) *log.ToolsEntry {
		te := &log.ToolsEntry{Time: at, Actor: "provlog", Server: "s"}
		for i := range n {
			te.Tools = append(te.Tools, log.ToolSum{Name: name(i), SHA256: strings.Repeat("ab", 32)})
		}
		return te
	}
	for _, tc := range []struct {
		name  string
		te    *log.ToolsEntry
		parts int
	}{
		{"small", list(3, func(i int) string { return string(rune('a' + i)) }), 1},
		{"10000 tools", list(10000, func(i int) string {
			return "tool_" + strings.Repeat("x", i%40) + string(rune('a'+i%26)) + strings.Repeat("0", i/1000)
		}), 0},
		{"names to escape", list(3000, func(i int) string { return strings.Repeat("<\"\u2028\\", 3) + string(rune(0x4e00+i)) }), 0},
	} {
		parts, err := tc.te.MarshalParts()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.parts != 0 && len(parts) != tc.parts || tc.parts == 0 && len(parts) < 2 {
			t.Fatalf("%s: %d parts", tc.name, len(parts))
		}
		var got []log.ToolSum
		for i, b := range parts {
			if len(b) > log.MaxEntrySize {
				t.Fatalf("%s: part %d is %d bytes", tc.name, i+1, len(b))
			}
			e, err := log.ParseEntry(b)
			if err != nil {
				t.Fatal(err)
			}
			te, err := log.ParseTools(e)
			if err != nil {
				t.Fatal(err)
			}
			wantPart, wantParts := int64(i+1), int64(len(parts))
			if len(parts) == 1 {
				wantPart, wantParts = 0, 0
			}
			if te.Part != wantPart || te.Parts != wantParts || te.Server != "s" {
				t.Errorf("%s: part %d reads as part %d of %d, server %q", tc.name, i+1, te.Part, te.Parts, te.Server)
			}
			got = append(got, te.Tools...)
		}
		if !reflect.DeepEqual(got, tc.te.Tools) {
			t.Errorf("%s: the parts hold %d tools, not the list of %d", tc.name, len(got), len(tc.te.Tools))
		}
	}
	huge := list(1, func(int) string { return strings.Repeat("n", log.MaxEntrySize) })
	if _, err := huge.MarshalParts(); !errors.Is(err, log.ErrEntryTooLarge) || !strings.Contains(err.Error(), "tool 0") {
		t.Errorf("a tool too large for any entry: %v", err)
	}
	for _, f := range []string{`"part":0,"parts":2`, `"part":3,"parts":2`, `"parts":2`, `"part":1`} {
		b := []byte(`{"actor":"provlog","kind":"tools",` + f + `,"server":"s","time":"2026-12-01T09:00:00.000000000Z","tools":[],"v":1}`)
		e, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := log.ParseTools(e); err == nil || !strings.Contains(err.Error(), "part") {
			t.Errorf("%s: %v", f, err)
		}
	}
}
