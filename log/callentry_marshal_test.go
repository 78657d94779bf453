package log

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// The call and call.result entries are written from their members by
// type (appendMembers), without the map of fields other kinds go through.
// These tests hold them to the bytes of that map, as the entries were
// written before (the fields below are those of the map Marshal built),
// encoded by encoding/json and canonicalized (marshalRoundTrip).

// callFields is the field map of a call entry.
func callFields(c *CallEntry) map[string]any {
	f := map[string]any{"server": c.Server, "tool": c.Tool, "started": c.Time.UTC().Format(TimeFormat)}
	if c.Args != nil {
		f["args"] = c.Args
	} else {
		f["args_sha256"] = c.ArgsSHA256
	}
	if c.ToolSHA256 != "" {
		f["tool_sha256"] = c.ToolSHA256
	}
	if c.Client != nil {
		f["client"] = map[string]string{"name": c.Client.Name, "version": c.Client.Version}
	}
	if c.ProtocolVersion != "" {
		f["protocol_version"] = c.ProtocolVersion
	}
	if c.Continues != 0 {
		f["continues"] = c.Continues
	}
	if c.InputResponsesSHA256 != "" {
		f["input_responses_sha256"] = c.InputResponsesSHA256
	}
	return f
}

// resultFields is the field map of a call.result entry.
func resultFields(r *CallResultEntry) map[string]any {
	f := map[string]any{"call": r.Call, "is_error": r.IsError, "duration_ns": r.Duration.Nanoseconds()}
	for k, v := range map[string]string{"result_sha256": r.ResultSHA256, "result_retained_sha256": r.RetainedSHA256, "error": r.Error, "release": r.DataRelease} {
		if v != "" {
			f[k] = v
		}
	}
	if r.ResultRetained {
		f["result_retained"] = true
	}
	if r.ResultRemarshalled {
		f["result_remarshalled"] = true
	}
	if r.ResultSHA256 != "" || r.ResultBytes != 0 {
		f["result_bytes"] = r.ResultBytes
	}
	if r.ResultRaw {
		f["result_canonical"] = false
	}
	if r.ErrorCode != 0 {
		f["error_code"] = r.ErrorCode
	}
	return f
}

// sameAsMap checks that got (from Marshal) is what the field map gives.
func sameAsMap(t *testing.T, name string, got []byte, gotErr error, e *Entry) {
	t.Helper()
	want, wantErr := e.marshalRoundTrip()
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Errorf("%s: Marshal error %v, the map's %v", name, gotErr, wantErr)
	case gotErr == nil && !bytes.Equal(got, want):
		t.Errorf("%s:\nMarshal %s\nthe map %s", name, got, want)
	}
}

func checkCall(t *testing.T, name string, c *CallEntry) {
	t.Helper()
	got, err := c.Marshal()
	sameAsMap(t, name, got, err, &Entry{Kind: KindCall, Time: c.Time, Actor: c.Actor, Auth: c.Auth, Fields: callFields(c)})
}

func checkResult(t *testing.T, name string, r *CallResultEntry) {
	t.Helper()
	got, err := r.Marshal()
	sameAsMap(t, name, got, err, &Entry{Kind: KindCallResult, Time: r.Time, Actor: r.Actor, Auth: r.Auth, Fields: resultFields(r)})
}

func TestCallMarshalMatchesFieldMap(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.FixedZone("x", -7200))
	auth := &Auth{Issuer: "https://idp.example/", Subject: "alice", ClientID: "agent", TokenSHA256: strings.Repeat("ab", 32), Via: AuthViaJWT,
		Act: &Act{Subject: "bob", Act: &Act{Subject: "carol", Issuer: "i"}}}
	odd := "q\"b\\\x00\x1f é😀\u2028 a\xffb"
	full := &CallEntry{Time: at, Actor: "alice", Auth: auth, Server: "ev", Tool: "echo", ToolSHA256: strings.Repeat("cd", 32),
		Args: CanonicalJSON(`{"message":"` + strings.Repeat("x", 1024) + `","n":1e+21}`), Client: &CallClient{Name: "cl", Version: "1.0"},
		ProtocolVersion: "2025-11-25", Continues: 5, InputResponsesSHA256: strings.Repeat("ef", 32)}
	checkCall(t, "full", full)
	for name, c := range map[string]*CallEntry{
		"plain":            {Time: at, Actor: "local", Server: "e", Tool: "t", Args: CanonicalJSON(`{}`)},
		"args in blob":     {Time: at, Actor: "local", Server: "e", Tool: "t", ArgsSHA256: strings.Repeat("01", 32)},
		"odd strings":      {Time: at, Actor: odd, Server: odd, Tool: odd, Args: CanonicalJSON(`{}`), Client: &CallClient{Name: odd, Version: odd}, ProtocolVersion: odd},
		"empty client":     {Time: at, Server: "e", Tool: "t", Args: CanonicalJSON(`[]`), Client: &CallClient{}},
		"big continues":    {Time: at, Server: "e", Tool: "t", Args: CanonicalJSON(`{}`), Continues: math.MaxUint64},
		"continues 2^53+1": {Time: at, Server: "e", Tool: "t", Args: CanonicalJSON(`{}`), Continues: 1<<53 + 1},
		"year 10000":       {Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Server: "e", Tool: "t", Args: CanonicalJSON(`{}`)},
		"bad auth":         {Time: at, Server: "e", Tool: "t", Args: CanonicalJSON(`{}`), Auth: &Auth{Issuer: "i"}},
		"too large":        {Time: at, Server: "e", Tool: "t", Args: CanonicalJSON(`"` + strings.Repeat("a", MaxEntrySize) + `"`)},
	} {
		checkCall(t, name, c)
	}

	fullR := &CallResultEntry{Time: at, Actor: "alice", Auth: auth, Call: 7, ResultSHA256: strings.Repeat("cd", 32), ResultBytes: 42,
		ResultRaw: true, ResultRetained: true, RetainedSHA256: strings.Repeat("ee", 32), ResultRemarshalled: true,
		IsError: true, Error: odd, ErrorCode: -32001, DataRelease: "v1", Duration: time.Second}
	checkResult(t, "full", fullR)
	for name, r := range map[string]*CallResultEntry{
		"plain":          {Time: at, Actor: "local", Call: 1, ResultSHA256: strings.Repeat("cd", 32), ResultBytes: 1100, Duration: 1234567},
		"no result":      {Time: at, Call: 1, IsError: true, Error: "boom"},
		"bytes, no hash": {Time: at, Call: 1, ResultBytes: 3},
		"big numbers":    {Time: at, Call: math.MaxUint64, ErrorCode: math.MinInt64, Duration: math.MaxInt64, ResultBytes: 1<<53 + 1},
		"zero":           {},
	} {
		checkResult(t, name, r)
	}
}

// FuzzCallMarshal holds both Marshals to the field map for arbitrary
// strings and numbers.
func FuzzCallMarshal(f *testing.F) {
	f.Add("alice", "echo", `{"a":1}`, uint64(3), int64(-32000), true)
	f.Add("a\xff\"", "\u2028", `[]`, uint64(1)<<60, int64(0), false)
	f.Fuzz(func(t *testing.T, s, tool, args string, n uint64, code int64, flag bool) {
		at := time.Unix(int64(n%(1<<40)), int64(n%1e9))
		c := &CallEntry{Time: at, Actor: s, Server: s, Tool: tool, ToolSHA256: tool, ProtocolVersion: s, Continues: n, InputResponsesSHA256: s}
		if canon, err := Canonicalize([]byte(args)); err == nil {
			c.Args = canon
		} else {
			c.ArgsSHA256 = "h" + args // never empty: Marshal refuses that before the map could
		}
		if flag {
			c.Client = &CallClient{Name: s, Version: tool}
		}
		checkCall(t, "fuzz call", c)
		r := &CallResultEntry{Time: at, Actor: s, Call: n, ResultSHA256: tool, ResultBytes: code, ResultRaw: flag, ResultRetained: !flag,
			RetainedSHA256: s, IsError: flag, Error: s, ErrorCode: code, DataRelease: tool, Duration: time.Duration(code)}
		checkResult(t, "fuzz result", r)
	})
}

func BenchmarkCallMarshal(b *testing.B) {
	c := &CallEntry{Time: time.Now(), Actor: "local", Server: "e", Tool: "echo", ToolSHA256: strings.Repeat("ab", 32),
		Args: CanonicalJSON(`{"message":"` + strings.Repeat("x", 1024) + `"}`), Client: &CallClient{Name: "bench", Version: "1"}, ProtocolVersion: "2025-11-25"}
	r := &CallResultEntry{Time: time.Now(), Actor: "local", Call: 12345, ResultSHA256: strings.Repeat("cd", 32), ResultBytes: 1100, Duration: 1234567}
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.Marshal()
		}
	})
	b.Run("call.result", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Marshal()
		}
	})
}
