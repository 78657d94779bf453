package log_test

import (
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

func TestNamespaceEntry(t *testing.T) {
	at := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	b, err := (&log.NamespaceEntry{Time: at, Issuer: "https://idp.example", ActorPrefix: "idp:"}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"provlog","actor_prefix":"idp:","issuer":"https://idp.example","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	n, err := log.ParseNamespaceEntry(e)
	if err != nil || n.Issuer != "https://idp.example" || n.ActorPrefix != "idp:" || !n.Time.Equal(at) {
		t.Fatalf("ParseNamespaceEntry: %+v, %v", n, err)
	}
	for _, bad := range []string{
		`{"actor":"idp:bob","actor_prefix":"idp:","issuer":"https://idp.example","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`,
		`{"actor":"provlog","actor_prefix":"","issuer":"https://idp.example","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`,
		`{"actor":"provlog","actor_prefix":1,"issuer":"https://idp.example","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`,
		`{"actor":"provlog","actor_prefix":"idp:","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`,
	} {
		e, err := log.ParseEntry([]byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := log.ParseNamespaceEntry(e); err == nil {
			t.Errorf("ParseNamespaceEntry(%s) = %+v, want an error", bad, n)
		}
	}
	if _, err := (&log.NamespaceEntry{Time: at, Issuer: "https://idp.example"}).Marshal(); err == nil {
		t.Error("a namespace entry without a prefix was written")
	}
}

// FuzzParseNamespaceEntry checks that a namespace entry read from any
// bytes never panics, has an issuer and a prefix, and is written back to
// the same bytes when it has no other members.
func FuzzParseNamespaceEntry(f *testing.F) {
	f.Add([]byte(`{"actor":"provlog","actor_prefix":"idp:","issuer":"https://idp.example","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`))
	f.Add([]byte(`{"actor":"provlog","actor_prefix":"idp:","extra":[1],"issuer":"x","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`))
	f.Add([]byte(`{"actor":"provlog","actor_prefix":null,"issuer":"x","kind":"namespace","time":"2026-12-07T16:00:00.000000000Z","v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := log.ParseEntry(data)
		if err != nil {
			return
		}
		n, err := log.ParseNamespaceEntry(e)
		if err != nil {
			return
		}
		if n.Issuer == "" || n.ActorPrefix == "" {
			t.Fatalf("parsed %+v from %q", n, data)
		}
		if len(e.Fields) != 2 || e.Auth != nil {
			return
		}
		b, err := n.Marshal()
		if err != nil {
			t.Fatalf("Marshal of parsed %+v: %v", n, err)
		}
		if string(b) != string(data) {
			t.Fatalf("parsed %q, written back as %q", data, b)
		}
	})
}
