package log

import (
	"strings"
	"testing"
	"time"
)

func TestParseAnchorEntry(t *testing.T) {
	want := &AnchorEntry{Size: 7, Root: "cm9vdA==", Digest: "d", Record: "r-7.json", RecordHash: "ab",
		Timestamps: []AnchorTimestamp{{URL: "http://tsa", Time: time.Unix(5, 0).UTC(), Serial: "1", TokenHash: "cd"}},
		Tlogs:      []AnchorTlog{{Kind: "rekor-v1", URL: "http://rekor", LogIndex: 3, UUID: "u", IntegratedTime: 9, EntryHash: "ef"}}}
	e, err := NewEntry(KindAnchor, time.Unix(10, 0), "provlog", want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	pe, err := ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAnchorEntry(pe)
	if err != nil {
		t.Fatal(err)
	}
	if got.Record != want.Record || got.RecordHash != want.RecordHash || got.Size != want.Size ||
		len(got.Timestamps) != 1 || !got.Timestamps[0].Time.Equal(want.Timestamps[0].Time) || len(got.Tlogs) != 1 || got.Tlogs[0] != want.Tlogs[0] {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}

	if _, err := ParseAnchorEntry(&Entry{Kind: KindCall}); err == nil || !strings.Contains(err.Error(), "not an anchor entry") {
		t.Errorf("a call entry: %v", err)
	}
	bad := &Entry{Kind: KindAnchor, Fields: map[string]any{"size": "seven"}}
	if _, err := ParseAnchorEntry(bad); err == nil {
		t.Error("an anchor entry whose size is a string parsed")
	}
	extra := &Entry{Kind: KindAnchor, Fields: map[string]any{"record": "r", "unknown": 1}}
	if _, err := ParseAnchorEntry(extra); err == nil {
		t.Error("an anchor entry with an unknown member parsed")
	}
}
