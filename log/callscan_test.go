package log

import (
	"strings"
	"testing"
	"time"
)

// FuzzScanCallLink checks that scanCallLink reads from an entry's bytes
// exactly what CallTracker.Add reads of the parsed entry (ParseCall,
// ParseCallResult) whenever those accept it, that it takes an entry of
// another kind for one, and that nothing panics.
func FuzzScanCallLink(f *testing.F) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, m := range []interface{ Marshal() ([]byte, error) }{
		&CallEntry{Time: at, Actor: "a", Server: "s", Tool: "t", Args: CanonicalJSON(`{"x":[1,"y\"}]\\"],"z":{}}`), Client: &CallClient{Name: "n"}},
		&CallEntry{Time: at, Actor: "idp:b\"\\é", Server: "s", Tool: "t", ArgsSHA256: "ab", Continues: 7, InputResponsesSHA256: "cd",
			Auth: &Auth{Issuer: "https://idp.example/", Subject: "b", TokenSHA256: strings.Repeat("ab", 32), Via: AuthViaJWT, Act: &Act{Subject: "agent"}}},
		&CallEntry{Time: at, Actor: "a", Server: "s", Tool: "echo", Args: CanonicalJSON(`{"message":"` + strings.Repeat("x", 1000) + `"}`)},
		&CallResultEntry{Time: at, Actor: "a", Call: 3, ResultSHA256: "ab", ResultBytes: 9, ResultRaw: true, Error: "e", ErrorCode: -1},
		&CallResultEntry{Time: at, Actor: "a", Call: 1 << 62, IsError: true, Duration: time.Second},
		&ToolsEntry{Time: at, Actor: "provlog", Server: "s", Tools: []ToolSum{{Name: "a", SHA256: "00"}}},
		&ReadEntry{Kind: KindPromptGet, Time: at, Actor: "a", Server: "s", Prompt: "p", Args: CanonicalJSON(`{"k":"v"}`), ResultSHA256: "ab", Continues: 2},
	} {
		b, err := m.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		if l, err := scanCallLink(b); err != nil || l.actor == "" && l.kind != "" {
			f.Fatalf("scanCallLink(%s) = %+v, %v", b, l, err)
		}
		f.Add(b)
	}
	// An actor no marshaller writes (a separator, a control), as a
	// forged or older log may hold it: the scan reads it all the same.
	f.Add([]byte(`{"actor":"idp:b\"\\` + "\u2028" + `é\u0001","args_sha256":"ab","kind":"call","server":"s","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`))
	// Calls of old logs, their outcome in them.
	f.Add([]byte(`{"actor":"alice","args":{"message":"hi"},"duration_ns":1500,"is_error":false,"kind":"call","result_bytes":12,"result_sha256":"` + strings.Repeat("0f", 32) + `","server":"ev","started":"2026-01-02T03:04:05.000000000Z","time":"2026-01-02T03:04:05.000000000Z","tool":"echo","v":1}`))
	f.Add([]byte(`{"actor":"a","args":{},"duration_ns":1,"is_error":true,"kind":"call","server":"s","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`))
	f.Add([]byte(`{"actor":"a","args":{},"is_error":false,"kind":"call","server":"s","time":"2026-01-02T03:04:05.000000000Z","tool":"t","v":1}`))
	f.Add([]byte(`{"actor":"a","call":18446744073709551615,"kind":"call.result","time":"2026-01-02T03:04:05.000000000Z","v":1}`))
	f.Add([]byte(`{"actor":"a","call":3,"call":4,"kind":"call.result","time":"2026-01-02T03:04:05.000000000Z","v":1}`))
	f.Add([]byte(`{"actor":"a","call":1e3,"kind":"call.result","time":"2026-01-02T03:04:05.000000000Z","v":1}`))
	f.Add([]byte(`{"actor":"a","args":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"kind":"call"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := scanCallLink(b)
		e, err := ParseEntry(b)
		if err != nil {
			return
		}
		want, err := entryLink(e)
		if err != nil {
			return // Add refuses it; the scan reads only some members
		}
		if gerr != nil || got != want {
			t.Fatalf("scanCallLink(%s) = %+v, %v; want %+v", b, got, gerr, want)
		}
	})
}
