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
