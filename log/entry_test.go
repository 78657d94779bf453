package log_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

func TestEntryRoundTrip(t *testing.T) {
	e := &log.Entry{
		Kind:  log.KindCall,
		Time:  time.Date(2026, 7, 1, 12, 30, 45, 123456789, time.FixedZone("CEST", 2*3600)),
		Actor: "alice",
		Fields: map[string]any{
			"server": "everything",
			"tool":   "echo",
			"args":   map[string]any{"b": 2, "a": "é\u2028<>&"},
			"n":      1.5,
		},
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"actor":"alice","args":{"a":"é` + "\u2028" + `<>&","b":2},"kind":"call","n":1.5,"server":"everything","time":"2026-07-01T10:30:45.123456789Z","tool":"echo","v":1}`
	if string(b) != want {
		t.Errorf("Marshal() =\n%s\nwant\n%s", b, want)
	}
	got, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != e.Kind || got.Actor != e.Actor || !got.Time.Equal(e.Time) || got.Time.Location() != time.UTC {
		t.Errorf("ParseEntry = %+v", got)
	}
	if n, ok := got.Fields["n"].(json.Number); !ok || n.String() != "1.5" {
		t.Errorf("Fields[n] = %#v, want json.Number 1.5", got.Fields["n"])
	}
	again, err := got.Marshal()
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("Marshal(ParseEntry(b)) = %s, %v, want %s", again, err, b)
	}

	// An entry with only the common fields.
	bare := &log.Entry{Kind: log.KindGenesis, Time: time.Unix(0, 0)}
	b, err = bare.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"actor":"","kind":"genesis","time":"1970-01-01T00:00:00.000000000Z","v":1}`; string(b) != want {
		t.Errorf("Marshal() = %s, want %s", b, want)
	}

	if _, err := (&log.Entry{Time: time.Now()}).Marshal(); err == nil {
		t.Error("Marshal accepted an empty kind")
	}
	if _, err := (&log.Entry{Kind: "call", Fields: map[string]any{"f": func() {}}}).Marshal(); err == nil {
		t.Error("Marshal accepted a value JSON cannot encode")
	}
}

func TestEntryReservedFields(t *testing.T) {
	for _, k := range []string{"v", "kind", "time", "actor"} {
		e := &log.Entry{Kind: "call", Fields: map[string]any{k: "x"}}
		if b, err := e.Marshal(); err == nil {
			t.Errorf("Marshal with field %q = %s, want error", k, b)
		}
	}
}

func TestEntryTooLarge(t *testing.T) {
	e := &log.Entry{Kind: "call", Time: time.Unix(1, 0), Actor: "a", Fields: map[string]any{"blob": ""}}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	fill := log.MaxEntrySize - len(b)
	e.Fields["blob"] = strings.Repeat("a", fill)
	b, err = e.Marshal()
	if err != nil || len(b) != log.MaxEntrySize {
		t.Fatalf("Marshal of exactly %d bytes: %d bytes, %v", log.MaxEntrySize, len(b), err)
	}
	if _, err := log.ParseEntry(b); err != nil {
		t.Errorf("ParseEntry of %d bytes: %v", len(b), err)
	}
	e.Fields["blob"] = strings.Repeat("a", fill+1)
	if _, err := e.Marshal(); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Errorf("Marshal of %d bytes: %v, want ErrEntryTooLarge", log.MaxEntrySize+1, err)
	}
	big := bytes.Repeat([]byte{' '}, log.MaxEntrySize+1)
	if _, err := log.ParseEntry(big); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Errorf("ParseEntry of %d bytes: %v, want ErrEntryTooLarge", len(big), err)
	}
}

func TestParseEntryRefuses(t *testing.T) {
	for _, bad := range []string{
		``,
		`[]`,
		`"call"`,
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1} `,
		` {"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1}`,
		`{"kind":"call","actor":"a","time":"2026-07-01T10:30:45.123456789Z","v":1}`,      // members out of order
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1.0}`,    // number not canonical
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":2}`,      // version
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":"1"}`,    // version type
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z"}`,            // no version
		`{"actor":"a","kind":"","time":"2026-07-01T10:30:45.123456789Z","v":1}`,          // empty kind
		`{"actor":"a","kind":1,"time":"2026-07-01T10:30:45.123456789Z","v":1}`,           // kind type
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45Z","v":1}`,                // no nanoseconds
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789+02:00","v":1}`, // not UTC
		`{"actor":1,"kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1}`,        // actor type
		`{"kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1}`,                  // no actor
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1,"x":"\u0041"}`,
		`{"actor":"a","kind":"call","time":"2026-07-01T1:30:45.123456789Z","v":1}`,  // one-digit hour
		`{"actor":"a","kind":"call","time":"2026-07-01T10:30:45,123456789Z","v":1}`, // comma
		`{"actor":"a","actor":"b","kind":"call","time":"2026-07-01T10:30:45.123456789Z","v":1}`,
	} {
		if e, err := log.ParseEntry([]byte(bad)); err == nil {
			t.Errorf("ParseEntry(%s) = %+v, want error", bad, e)
		}
	}
}

// TestEntryActorShows: no entry is written whose actor a reader could not
// see as written (ESC, a bidirectional override, a zero-width space, bytes
// that are not UTF-8), by whichever marshaller writes it; the log's
// writers were trusted to have checked before.
func TestEntryActorShows(t *testing.T) {
	when := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	for _, actor := range []string{"mallory\x1b]0;audit passed\x07", "ali\u202ece", "bob\u200b", "eve\xff"} {
		writers := map[string]func() ([]byte, error){
			"Entry":           (&log.Entry{Kind: "note", Time: when, Actor: actor, Fields: map[string]any{"a": "b"}}).Marshal,
			"Entry, odd name": (&log.Entry{Kind: "note", Time: when, Actor: actor, Fields: map[string]any{"a\xff": "b"}}).Marshal,
			"CallEntry":       (&log.CallEntry{Time: when, Actor: actor, Server: "s", Tool: "t", Args: log.CanonicalJSON(`{}`)}).Marshal,
			"CallResultEntry": (&log.CallResultEntry{Time: when, Actor: actor, Call: 1}).Marshal,
		}
		for name, marshal := range writers {
			if b, err := marshal(); err == nil || !strings.Contains(err.Error(), "actor") {
				t.Errorf("%s with actor %q: wrote %q, err %v; want it refused, naming the actor", name, actor, b, err)
			}
		}
	}
	if _, err := (&log.Entry{Kind: "note", Time: when, Actor: "Zoë 東京", Fields: map[string]any{"a": "b"}}).Marshal(); err != nil {
		t.Errorf("actor Zoë 東京: %v", err)
	}
}
