package log_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

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
