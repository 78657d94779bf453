package log_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/provlog/provlog/log"
)

func TestGenesisRoundTrip(t *testing.T) {
	want := &log.GenesisEntry{Time: time.Date(2026, 12, 1, 9, 0, 0, 1, time.UTC), Origin: "provlog.test/g",
		VKey: "provlog.test/g+01234567+AAAA", AnchorKey: []byte{0x30, 0x59, 0xff}, Version: "v0.1"}
	b, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if old, _ := log.Genesis(want.Time, want.Origin, want.VKey, want.AnchorKey, want.Version); !bytes.Equal(old, b) {
		t.Errorf("Genesis = %s, Marshal = %s", old, b)
	}
	if !strings.Contains(string(b), `"anchor_key":"MFn/"`) || !strings.Contains(string(b), `"actor":"provlog"`) {
		t.Errorf("genesis entry %s: anchor_key is not standard base64 or the actor is not provlog", b)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := log.ParseGenesis(e)
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != want.Origin || got.VKey != want.VKey || !bytes.Equal(got.AnchorKey, want.AnchorKey) ||
		got.Version != want.Version || !got.Time.Equal(want.Time) {
		t.Errorf("ParseGenesis = %+v, want %+v", got, want)
	}
}

func TestParseGenesisRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields map[string]any
		kind   string
		want   string
	}{
		{"other kind", map[string]any{"origin": "o", "vkey": "k"}, log.KindCall, "not a genesis entry"},
		{"no origin", map[string]any{"vkey": "k"}, log.KindGenesis, `"origin"`},
		{"numeric vkey", map[string]any{"origin": "o", "vkey": 1}, log.KindGenesis, `"vkey"`},
		{"anchor key not base64", map[string]any{"origin": "o", "vkey": "k", "anchor_key": "%%"}, log.KindGenesis, "base64"},
		{"anchor key a number", map[string]any{"origin": "o", "vkey": "k", "anchor_key": 7}, log.KindGenesis, `"anchor_key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := (&log.Entry{Kind: tc.kind, Time: time.Unix(0, 0), Fields: tc.fields}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			e, err := log.ParseEntry(b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := log.ParseGenesis(e); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseGenesis(%s) = %v, want an error about %s", b, err, tc.want)
			}
		})
	}
	// A genesis without an anchoring key (null) parses, with none.
	b, _ := log.Genesis(time.Unix(0, 0), "o", "k", nil, "")
	e, _ := log.ParseEntry(b)
	if g, err := log.ParseGenesis(e); err != nil || g.AnchorKey != nil {
		t.Errorf("genesis with a null anchor_key: %+v, %v", g, err)
	}
}

// TestCheckActor: ids a reader of the log could take for another are
// refused naming the character and where it is; ids that show as what
// they are pass.
func TestCheckActor(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"provlog", "is the sidecar's own"},
		// provlog's namespace, in any case: a reader takes these for
		// provlog's own entries.
		{"provlog.retention", "is the sidecar's own"},
		{"provlog.operator", "is the sidecar's own"},
		{"provlog.", "is the sidecar's own"},
		{"Provlog.Operator", "is the sidecar's own"},
		{"PROVLOG", "is the sidecar's own"},
		{"al\xffice", "valid UTF-8"},
		{strings.Repeat("a", 65), "at most 64 bytes"},
		{"alice ", "space at its start or end"},
		{"\u3000alice", "space at its start or end"},
		{"a\nb", "holds a control character, U+000A, at character 2"},
		{"bo\u0085b", "holds a control character, U+0085, at character 3"},
		{"alice\u200b", "holds a format character (shown as nothing, or changing how its neighbours show), U+200B, at character 6"},
		{"\u202eecila", "U+202E, at character 1"},
		{"ali\ufeffce", "U+FEFF, at character 4"},
		{"al\u2060ice", "U+2060, at character 3"},
		{"ali\u00adce", "U+00AD, at character 4"},
		{"alice\u200d", "U+200D, at character 6"},
		{"alice\U000e0041", "U+E0041, at character 6"},
		{"alice\u3164", "holds a default-ignorable character (shown as nothing), U+3164, at character 6"},
		{"\u115falice", "U+115F, at character 1"},
		{"日本\ufe0f", "holds a variation selector (shown as nothing), U+FE0F, at character 3"},
		{"alice\u2800", "holds the blank braille pattern (shown as a space), U+2800, at character 6"},
		{"alice\u2028x", "holds a line or paragraph separator, U+2028, at character 6"},
		{"alice\ue000", "holds a private-use character (no font need show it), U+E000, at character 6"},
		{"alice\u0378", "holds a code point not assigned in Unicode"},
	} {
		err := log.CheckActor(tc.id, 64)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckActor(%q) = %v, want it to say %q", tc.id, err, tc.want)
		}
	}
	for _, id := range []string{"alice", "bob smith", "kc:alice@corp.example", "日本", "José", "Jose\u0301", "✓", "provlog2", "provlog-bot", "provlog:alice", "provlogs.x", "local"} {
		if err := log.CheckActor(id, 64); err != nil {
			t.Errorf("CheckActor(%q) = %v", id, err)
		}
	}
}

// TestInvisibleSet: every code point Unicode says renderers may show as
// nothing (Default_Ignorable_Code_Point, which is drawn from these three
// tables) and every one outside the graphic categories is invisible;
// every one left shows.
func TestInvisibleSet(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		ignorable := unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
		got := log.Invisible(r) != ""
		if want := ignorable || !unicode.IsGraphic(r) || r == '\u2800'; got != want {
			t.Fatalf("Invisible(U+%04X) = %q, want invisible %v", r, log.Invisible(r), want)
		}
	}
}
