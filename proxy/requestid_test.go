package proxy

import (
	"strings"
	"testing"
)

// unsafeIDMessages are messages whose id go-sdk would answer under
// another (1.5 as 1, 1e3 as 1000, -0 as 0), in each shape a front hands
// the SDK: a call alone, one of a batch, a list request; on a session of
// 2025-03-26, on which the SDK serves batches.
var unsafeIDMessages = []struct{ name, msg, id string }{
	{"call", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`, "1.5"},
	{"exponent", `{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`, "1e3"},
	{"minus zero call", `{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`, "-0"},
	{"minus zero list", `{"jsonrpc":"2.0","id":-0,"method":"tools/list"}`, "-0"},
	{"batch", `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":6.5,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}]`, "6.5"},
	{"batch list", `[{"jsonrpc":"2.0","id":5.5,"method":"tools/list"}]`, "5.5"},
}

// TestUnsafeIDsRefused: a request whose id go-sdk would change is refused
// under id null, whatever it asks, in a batch or not, and wherever it
// stands on a stdio line; nothing is recorded or forwarded, and the
// session goes on. A batch (on both fronts), a message after another on
// its line or followed by one (on stdio) went to the SDK unchecked: 6.5
// was called, recorded and answered as 6; and -0 was answered as 0.
func TestUnsafeIDsRefused(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	refused := func(t *testing.T, got, id string) {
		t.Helper()
		if !strings.Contains(got, `"id":null`) || !strings.Contains(got, "the request id "+id+" is not a string or an integer") {
			t.Errorf("answered %.300s, want a refusal of id %s", got, id)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		pc := connectPipeClient(t, p)
		pc.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"pipe-test","version":"1"}}}`)
		pc.read()
		pc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		before := l.size(t)
		for _, tc := range unsafeIDMessages {
			pc.send(tc.msg)
			refused(t, string(pc.read()), tc.id)
		}
		// Beside a ping on its line: after it, and before it.
		ping := `{"jsonrpc":"2.0","id":3,"method":"ping"}`
		call := unsafeIDMessages[0]
		for _, line := range []string{ping + " " + call.msg, call.msg + ping} {
			pc.send(line)
			a, b := string(pc.read()), string(pc.read())
			if strings.Contains(b, `"id":3`) {
				a, b = b, a
			}
			if !strings.Contains(a, `"id":3,"result"`) {
				t.Errorf("%s: the ping: %s", line, a)
			}
			refused(t, b, call.id)
		}
		if got := l.size(t); got != before {
			t.Errorf("refused requests grew the log by %d entries", got-before)
		}
		pc.send(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`)
		if got := string(pc.read()); !strings.Contains(got, `"id":0,"result"`) {
			t.Errorf("a call after the refusals: %s", got)
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		front := serveHTTP(t, p)
		cs := connectHTTP(t, front, "2025-03-26", nil)
		header := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-03-26"}
		before := l.size(t)
		for _, tc := range unsafeIDMessages {
			_, got := postMCP(t, front, tc.msg, header)
			refused(t, got, tc.id)
		}
		if got := l.size(t); got != before {
			t.Errorf("refused requests grew the log by %d entries", got-before)
		}
	})
}

// TestPipeFrontDuplicateID: on stdio, a tools/call under the id of a call
// in progress, however it is spelt, is refused under id null (as the SDK
// refuses it on a pipe), and neither recorded nor made; a cancellation
// naming the first call so spelt reaches it. The pipe front handed such
// a call to the SDK, which knows nothing of the front's calls and made
// it beside the first, and it keyed calls on their ids' raw text.
func TestPipeFrontDuplicateID(t *testing.T) {
	for _, tc := range []struct{ name, first, second, cancel string }{
		{"as sent", `"same"`, `"same"`, `"same"`},
		{"escaped", `"same"`, `"s\u0061me"`, `"\u0073ame"`},
		{"integer", `0`, `0`, `-0`}, // a requestId -0 is 0 to the SDK
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l, noted := hangProxy(t, "f")
			pc := newPipeClient(t, p)
			hang := func(id string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"f__hang","arguments":{}}}`
			}
			pc.send(hang(tc.first))
			waitFor(t, "the first call to start", func() bool { return noted("started") == 1 })
			before := l.size(t)
			pc.send(hang(tc.second))
			if got := string(pc.read()); !strings.Contains(got, `"id":null`) || !strings.Contains(got, "duplicate in-flight request ID") {
				t.Errorf("the call with the id of a call in progress: %s, want a refusal", got)
			}
			if got := l.size(t); got != before || noted("started") != 1 {
				t.Errorf("the refused call grew the log by %d entries; the server started %d calls", got-before, noted("started"))
			}
			pc.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + tc.cancel + `}}`)
			if got := string(pc.read()); !strings.Contains(got, `"id":`+tc.first) || !strings.Contains(got, "cancelled by the client") {
				t.Errorf("the first call, cancelled: %s", got)
			}
		})
	}
}

// TestPipeFrontIDReusedOnceAnswered: a client may use a call's id again
// as soon as it has the call's answer. The pipe front freed the id only
// after writing the answer, and refused as a duplicate a call that came
// before then (the second call under one id, run after run).
func TestPipeFrontIDReusedOnceAnswered(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	pc := newPipeClient(t, p)
	for i := range 100 {
		pc.send(`{"jsonrpc":"2.0","id":"again","method":"tools/call","params":{"name":"f__ok","arguments":{}}}`)
		if got := string(pc.read()); !strings.Contains(got, `"id":"again","result"`) {
			t.Fatalf("call %d under an id answered before: %.300s", i, got)
		}
	}
}
