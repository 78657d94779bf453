package proxy

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestFastPathDuplicateID: a tools/call whose id is that of a call still
// in progress on the session is refused, as the SDK's handler refuses it
// ("duplicate in-flight request ID"), and is neither recorded nor made;
// the call in progress still takes its notifications/cancelled. The fast
// path made and recorded the second call, whose entry took the first's
// place in the session's calls in progress: the client's cancellation of
// the first went to the second, and the first ran on.
func TestFastPathDuplicateID(t *testing.T) {
	// One id, however it is spelled: a string by its value ("same" and
	// "s\u0061me" were two ids, keyed on the raw text, and a call under
	// the second was made while the first ran), an integer by its value
	// (a requestId -0 is 0 to the SDK; a request id -0 is refused).
	for _, tc := range []struct{ name, first, second, cancel string }{
		{"as sent", `"same"`, `"same"`, `"same"`},
		{"escaped", `"same"`, `"s\u0061me"`, `"\u0073ame"`},
		{"minus zero", `0`, `0`, `-0`},
	} {
		t.Run(tc.name, func(t *testing.T) { testDuplicateID(t, tc.first, tc.second, tc.cancel) })
	}
}

// hangProxy starts a proxy over the fixture server id, whose hang tool
// notes each call it starts and each cancellation it gets; noted counts
// the notes saying what.
func hangProxy(t *testing.T, id string) (*Proxy, *testLog, func(what string) int) {
	t.Helper()
	notes := filepath.Join(t.TempDir(), "hang")
	cfg := fixtureServerConfig(t, id)
	cfg.Env[fixtureCancelledEnv] = notes
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	return p, l, func(what string) int {
		b, _ := os.ReadFile(notes)
		return strings.Count(string(b), what)
	}
}

// hangFront serves hangProxy's p over HTTP and opens a session of
// revision protocol on it, returning the front's URL and the headers of a
// request on it.
func hangFront(t *testing.T, p *Proxy, protocol string) (string, map[string]string) {
	t.Helper()
	front := serveHTTP(t, p)
	t.Cleanup(func() { p.Close() }) // before the server's Close, which waits for a call made though refused
	waitRouted(t, p, "fx__hang")
	cs := fastSession(t, p, connectHTTP(t, front, protocol, nil))
	return front, map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": protocol}
}

// testDuplicateID: a call with id second while one with id first is in
// progress is refused; a cancellation with id cancel reaches the first.
func testDuplicateID(t *testing.T, first, second, cancel string) {
	p, l, noted := hangProxy(t, "fx")
	front, header := hangFront(t, p, "2025-11-25")
	hang := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx__hang","arguments":{}}}`
	}
	firstDone := make(chan string, 1)
	go func() { _, b := postMCP(t, front, hang(first), header); firstDone <- b }()
	waitFor(t, "the first call to start", func() bool { return noted("started") == 1 })

	before := l.size(t)
	secondDone := make(chan string, 1)
	go func() { _, b := postMCP(t, front, hang(second), header); secondDone <- b }()
	var answer string
	waitFor(t, "the second call to be answered or made", func() bool {
		select {
		case answer = <-secondDone:
			return true
		default:
			return noted("started") > 1
		}
	})
	if noted("started") > 1 {
		t.Fatalf("the call with the id of a call in progress was made; the log grew by %d entries", l.size(t)-before)
	}
	if !strings.Contains(answer, "duplicate in-flight request ID") {
		t.Errorf("the call with the id of a call in progress: %q, want a refusal", answer)
	}
	if got := l.size(t); got != before {
		t.Errorf("the refused call grew the log by %d entries", got-before)
	}

	postMCP(t, front, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+cancel+`}}`, header)
	if b := <-firstDone; !strings.Contains(b, "cancelled by the client") {
		t.Errorf("the first call, cancelled: %q", b)
	}
	waitFor(t, "the server to hear of the cancellation", func() bool { return noted("cancelled") == 1 })
}

// TestFastPathIDReusedOnceAnswered: a client may use a call's id again
// as soon as it has the call's answer. The fast path freed the id only
// after writing the answer, and refused as a duplicate a call that came
// before then. The first call's handler is held once its answer is
// written (a large one, on a 2025-06-18 session: one JSON body, out before
// the handler returns), while the client, which has it, calls again.
func TestFastPathIDReusedOnceAnswered(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, nil)
	front := serveHTTP(t, p)
	waitRouted(t, p, "fx__big")
	cs := fastSession(t, p, connectHTTP(t, front, "2025-06-18", nil))
	header := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-06-18"}
	call := `{"jsonrpc":"2.0","id":"again","method":"tools/call","params":{"name":"fx__big","arguments":{}}}`
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	p.testingOnlyAnswered = func() {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
	}
	defer close(release)
	// A connection of its own for each call: on one, the server reads
	// the next request only once the handler returned.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, front, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body) // the first is read while its handler is held
		resp.Body.Close()
		if !strings.Contains(string(b), `"id":"again","result"`) {
			t.Fatalf("call %d under an id answered before: %.300s", i, b)
		}
	}
	<-held
}
