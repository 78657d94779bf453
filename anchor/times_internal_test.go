package anchor

import (
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

// entryTimeSeeds are entries whose members named "time" sit elsewhere
// than the entry's own: nested before it (a call's arguments sort before
// "time"), nested after it (an anchor entry's timestamps), and inside
// strings, escaped.
func entryTimeSeeds(t testing.TB) [][]byte {
	at := time.Date(2026, 12, 6, 5, 49, 35, 123456789, time.UTC)
	var out [][]byte
	for _, f := range []map[string]any{
		{"args": map[string]any{"time": "1999-01-01T00:00:00.000000000Z", "x": []any{map[string]any{"time": "1998-01-01T00:00:00.000000000Z"}}}},
		{"timestamps": []any{map[string]any{"time": "2001-01-01T00:00:00Z"}}},
		{"a": `"time":"1997-01-01T00:00:00.000000000Z"`, "b": `\`, "c": `\"time\":\"1996`},
		{"a": "\u2028\"", "time_": "x"},
	} {
		b, err := (&log.Entry{Kind: log.KindCall, Time: at, Actor: "a\"time\"", Fields: f}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestEntryTime(t *testing.T) {
	for _, b := range entryTimeSeeds(t) {
		got, ok := entryTime(b)
		if !ok || string(got) != "2026-12-06T05:49:35.123456789Z" {
			t.Errorf("entryTime(%s) = %q, %v", b, got, ok)
		}
	}
	for _, b := range []string{``, `{}`, `{"kind":"x"}`, `{"a":{"time":"2026-12-06T05:49:35.123456789Z"}}`, `{"time":"2026"}`, `{"time":1}`, `{"a":"\"time\":\"2026-12-06T05:49:35.123456789Z"}`, `{"a":"`} {
		if got, ok := entryTime([]byte(b)); ok {
			t.Errorf("entryTime(%s) = %q, want none", b, got)
		}
	}
}

// FuzzEntryTime: whatever log.ParseEntry accepts, entryTime reads the
// same time from.
func FuzzEntryTime(f *testing.F) {
	for _, b := range entryTimeSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := entryTime(b)
		e, err := log.ParseEntry(b)
		if err != nil {
			return
		}
		if want := e.Time.Format(log.TimeFormat); !ok || string(got) != want {
			t.Errorf("entryTime(%q) = %q, %v; ParseEntry's time is %s", b, got, ok, want)
		}
	})
}
