package blobs

import (
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

func TestPurgeEntryRoundTrip(t *testing.T) {
	h := strings.Repeat("ab", 32)
	p := &PurgeEntry{Time: time.Unix(1, 0), Actor: "op", Reason: "erasure #1", Criteria: PurgeCriteria{Actor: "alice"}, Blobs: []string{h}}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePurge(e)
	if err != nil || got.Reason != "erasure #1" || len(got.Blobs) != 1 || got.Blobs[0] != h || got.Actor != "op" {
		t.Fatalf("%v %+v", err, got)
	}
	for _, bad := range []*PurgeEntry{
		{Reason: "", Blobs: []string{h}},
		{Reason: "r"},
		{Reason: "r", Blobs: []string{"AB"}},
		{Reason: "r", Blobs: make([]string, MaxPurgeBlobs+1)},
	} {
		if _, err := bad.Marshal(); err == nil {
			t.Errorf("%+v marshalled", bad)
		}
	}
	// The most blobs one entry may hold fit in an entry.
	many := &PurgeEntry{Reason: strings.Repeat("r", 200), Blobs: make([]string, MaxPurgeBlobs)}
	for i := range many.Blobs {
		many.Blobs[i] = h
	}
	if _, err := many.Marshal(); err != nil {
		t.Fatalf("a full purge entry: %v", err)
	}
}

func TestRefs(t *testing.T) {
	a, r := strings.Repeat("aa", 32), strings.Repeat("bb", 32)
	cases := []struct {
		f    map[string]any
		want string
	}{
		{map[string]any{"args_sha256": a, "tool_sha256": r}, a},
		{map[string]any{"result_sha256": r}, ""},
		{map[string]any{"result_sha256": r, "result_retained": true}, r},
		{map[string]any{"result_sha256": a, "result_retained": true, "result_retained_sha256": r}, r},
		{map[string]any{"args_sha256": "not hex"}, ""},
	}
	for _, tc := range cases {
		if got := strings.Join(Refs(&log.Entry{Fields: tc.f}), ","); got != tc.want {
			t.Errorf("Refs(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// FuzzParsePurge: any entry bytes parse to a purge entry or an error,
// without panicking; a retention's entry (criteria before alone) covers
// just the entries older than its cut, and any other criteria cover
// every entry.
func FuzzParsePurge(f *testing.F) {
	h := strings.Repeat("ab", 32)
	cut := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, c := range []PurgeCriteria{{Before: cut}, {Before: cut, Actor: "a"}, {Task: "t"}, {Blobs: []string{h}}} {
		b, err := (&PurgeEntry{Time: cut, Actor: "op", Reason: "r", Criteria: c, Blobs: []string{h}}).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(0))
	}
	f.Add([]byte(`{"v":1,"kind":"purge","time":"2026-01-02T03:04:05.000000000Z","actor":"op","reason":"r","blobs":[],"criteria":{"before":"x"}}`), int64(1))
	f.Fuzz(func(t *testing.T, b []byte, ns int64) {
		e, err := log.ParseEntry(b)
		if err != nil {
			return
		}
		p, err := ParsePurge(e)
		if err != nil {
			return
		}
		at := time.Unix(0, ns)
		crit, _ := e.Fields["criteria"].(map[string]any)
		before, alone := crit["before"].(string)
		cutAt, perr := time.Parse(time.RFC3339Nano, before)
		retention := alone && len(crit) == 1 && perr == nil && !cutAt.IsZero()
		if want := !retention || at.Before(cutAt); p.Covers(at) != want {
			t.Fatalf("criteria %v: Covers(%v) = %v, want %v", crit, at, p.Covers(at), want)
		}
	})
}
