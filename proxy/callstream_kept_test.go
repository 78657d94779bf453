package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keptSession starts a proxy in front of a streamServer and returns it,
// its log, its front's URL and a 2025-11-25 session on it.
func keptSession(t *testing.T, tweak func(*Proxy)) (*Proxy, *testLog, string, *mcp.ClientSession) {
	down := newStreamServer(t)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.url}}, nil)
	if tweak != nil {
		tweak(p)
	}
	front := serveHTTP(t, p)
	return p, l, front, fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
}

// pollAway makes a poll call whose client does not come back before the
// result, and returns the stream's first event id once its response is
// kept undelivered.
func pollAway(t *testing.T, p *Proxy, l *testLog, front string, cs *mcp.ClientSession) string {
	t.Helper()
	at := l.size(t)
	body, first := postCall(t, front, cs.ID(), "poll")
	for body.next(t) != nil { // the server's retry, then the end
	}
	body.Close()
	l.waitSize(t, at+2)
	waitFor(t, "the polled response to be kept", func() bool { return keptAs(p, cs.ID(), first["id"]) == "waiting" })
	return first["id"]
}

// deliver makes a call of tool, reads its response, which has want in
// it, and returns the stream's first event id once the proxy keeps it
// as delivered (or has dropped it).
func deliver(t *testing.T, p *Proxy, front string, cs *mcp.ClientSession, tool, want string) string {
	t.Helper()
	body, first := postCall(t, front, cs.ID(), tool)
	if ev := body.next(t); !strings.Contains(ev["data"], want) {
		t.Fatalf("%s: a response of %d bytes without %.20q", tool, len(ev["data"]), want)
	}
	body.Close()
	waitFor(t, "the response to be kept", func() bool {
		st := keptAs(p, cs.ID(), first["id"])
		return st == "delivered" || st == "gone"
	})
	return first["id"]
}

// TestKeptStreamsDeliveredFirst: when delivered streams fill
// deliveredStreamBytes, the oldest delivered one is dropped, not an older
// undelivered one, whose response a client certainly still needs; the
// newer delivered ones can still be resumed.
func TestKeptStreamsDeliveredFirst(t *testing.T) {
	p, l, front, cs := keptSession(t, nil)
	waiting := pollAway(t, p, l, front, cs)
	// Three big responses fit in the delivered streams' bound, a fourth does not.
	var big []string
	for range 4 {
		big = append(big, deliver(t, p, front, cs, "big", bigText))
	}
	p.kept.mu.Lock()
	if d := p.kept.dbytes; d > deliveredStreamBytes {
		t.Errorf("%d bytes of delivered streams kept, over %d", d, deliveredStreamBytes)
	}
	p.kept.mu.Unlock()
	for id, want := range map[string]string{waiting: "waiting", big[0]: "gone", big[1]: "delivered", big[2]: "delivered", big[3]: "delivered"} {
		if got := keptAs(p, cs.ID(), id); got != want {
			t.Errorf("stream of %s: %s, want %s", id, got, want)
		}
	}
	at := l.size(t)
	resumed := getResume(t, front, cs.ID(), waiting, http.StatusOK)
	if ev := resumed.next(t); !strings.Contains(ev["data"], "polled") {
		t.Errorf("resumed the undelivered stream: %q", ev)
	}
	resumed.Close()
	resumed = getResume(t, front, cs.ID(), big[3], http.StatusOK)
	if ev := resumed.next(t); !strings.Contains(ev["data"], bigText) {
		t.Errorf("resumed the newest delivered stream: a response of %d bytes", len(ev["data"]))
	}
	resumed.Close()
	getResume(t, front, cs.ID(), big[0], http.StatusBadRequest).Close()
	if got := l.size(t); got != at {
		t.Errorf("resuming wrote %d entries", got-at)
	}
}

// TestDeliveredStreamExpires: a delivered stream is dropped after
// deliveredKeep (an hour, then shortened here), then cannot be resumed; an
// undelivered one stays. Streams delivered one after the other, and one
// delivered once none is kept, all go.
func TestDeliveredStreamExpires(t *testing.T) {
	p, l, front, cs := keptSession(t, func(p *Proxy) { p.kept.testingOnlySetDeliveredKeep(time.Hour) })
	waiting := pollAway(t, p, l, front, cs)
	waitingBytes := keptBytes(p)
	at := l.size(t)
	gone := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			waitFor(t, "the delivered stream to be dropped", func() bool { return keptAs(p, cs.ID(), id) == "gone" })
			getResume(t, front, cs.ID(), id, http.StatusBadRequest).Close()
		}
	}
	a, b := deliver(t, p, front, cs, "echo", "echoed"), deliver(t, p, front, cs, "echo", "echoed")
	for _, id := range []string{a, b} {
		if got := keptAs(p, cs.ID(), id); got != "delivered" {
			t.Fatalf("a stream delivered within the hour: %s", got)
		}
	}
	p.kept.testingOnlySetDeliveredKeep(20 * time.Millisecond)
	gone(a, b)
	gone(deliver(t, p, front, cs, "echo", "echoed"))
	if got := keptAs(p, cs.ID(), waiting); got != "waiting" {
		t.Errorf("the undelivered stream: %s, want waiting", got)
	}
	if n := keptBytes(p); n != waitingBytes {
		t.Errorf("%d bytes kept, want the undelivered stream's %d", n, waitingBytes)
	}
	if got := l.size(t); got != at+6 {
		t.Errorf("three calls wrote %d entries, want 6", got-at)
	}
}
