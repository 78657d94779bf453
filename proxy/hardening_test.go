package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFrontLoopbackHostOrigin: on a loopback bind, every path refuses a
// foreign Host or Origin before its handler runs. (A tools/call with
// Host: evil.example and a valid token was answered 200 and recorded on
// the HTTP fast path, while the SDK's path refused it; cmd/provlog's
// TestFrontHostEveryPath has the end-to-end case.)
func TestFrontLoopbackHostOrigin(t *testing.T) {
	reached := 0
	srv := httptest.NewServer(Front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		io.WriteString(w, "ok")
	}), FrontOptions{}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "", 200},
		{"localhost:" + port, "", 200},
		{"LOCALHOST", "", 200},
		{"[::1]:" + port, "", 200},
		{"127.0.0.2", "", 200},
		{"localhost:" + port, "http://localhost:3000", 200},
		{"localhost:" + port, "https://127.0.0.1", 200},
		{"evil.example", "", 403},
		{"evil.example:" + port, "", 403},
		{"localhost.evil.example", "", 403},
		{"127.0.0.1.nip.io", "", 403},
		{"localhost:" + port, "http://evil.example", 403},
		{"localhost:" + port, "null", 403},
		{"localhost:" + port, "file://", 403},
		{"localhost:" + port, "http://localhost.evil.example", 403},
	} {
		for _, path := range []string{"/mcp", "/log/checkpoint", "/healthz", "/metrics", "/ui/", "/anything"} {
			req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader("{}"))
			req.Host = c.host
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			before := reached
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want || (c.want == 403) != (reached == before) {
				t.Errorf("%s Host %q Origin %q: %d (handler reached: %v), want %d", path, c.host, c.origin, resp.StatusCode, reached > before, c.want)
			}
		}
	}
}

// TestFrontSlowBodies opens many connections that send a chunked POST's
// headers and then nothing (19,980 of them once exhausted the sidecar's
// file descriptors): each one is closed once the body timeout passes, and
// the server answers other requests meanwhile.
func TestFrontSlowBodies(t *testing.T) {
	const n = 200
	srv := httptest.NewUnstartedServer(Front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		io.WriteString(w, "ok")
	}), FrontOptions{BodyTimeout: 300 * time.Millisecond}))
	srv.Config.ReadHeaderTimeout = time.Second
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
		conns[i] = c
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	closed := 0
	deadline := time.Now().Add(20 * time.Second) // a liveness bound, far above the timeout
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		if _, err := io.Copy(io.Discard, c); err == nil { // nil: the server closed it
			closed++
		}
	}
	if closed != n {
		t.Errorf("%d of %d slow connections closed by the server", closed, n)
	}
}

// TestFrontBodyDeadlineCleared: a request whose body arrived may run much
// longer than the body timeout (a long tool call, an event stream).
func TestFrontBodyDeadlineCleared(t *testing.T) {
	srv := httptest.NewServer(Front(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(500 * time.Millisecond):
			io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	}), FrontOptions{BodyTimeout: 100 * time.Millisecond}))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "done" {
		t.Errorf("a long request after its body: %q, want done", b)
	}
}

// TestSessionCapAndIdle: stateful HTTP sessions are capped (they were
// unbounded, ~20 KB each, closed only after an hour idle): an initialize
// beyond MaxSessions gets 503 with a clear error, and idle sessions are
// closed after SessionIdle, which makes room again.
func TestSessionCapAndIdle(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, nil, func(o *Options) {
		o.MaxSessions = 3
		o.SessionsPerActor = 3 // one actor fills the cap (TestSessionShare: shares)
		// The busy session calls every 100 ms or so while the real
		// reaper runs: an idle limit of 3 s lets the test stall 2.5 s
		// before the busy one looks idle (400 ms allowed 300 ms).
		o.SessionIdle = 3 * time.Second
	})
	front := serveHTTP(t, p)
	ctx := context.Background()
	var open []*mcp.ClientSession
	for range 3 {
		open = append(open, fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil)))
	}
	// The fourth initialize, by hand to see the answer.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	resp, b := postMCP(t, front, body, map[string]string{"Authorization": "Bearer " + testToken})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "too many sessions") {
		t.Errorf("a fourth session with max 3: %d %s; want 503, too many sessions", resp.StatusCode, b)
	}
	// It names the config keys an operator sets (it said max_sessions,
	// which no config has).
	if !strings.Contains(string(b), "sessions.max 3") || !strings.Contains(string(b), "sessions.idle (3s)") {
		t.Errorf("the 503 does not name sessions.max and sessions.idle with their values: %s", b)
	}
	// A busy session stays open; the idle ones are closed.
	busy := open[0]
	deadline := time.Now().Add(20 * time.Second) // a liveness bound, far above SessionIdle
	for {
		if _, err := busy.CallTool(ctx, &mcp.CallToolParams{Name: "provlog__status"}); err != nil {
			t.Fatalf("the busy session failed: %v", err)
		}
		_, ok1 := p.sessions.Load(open[1].ID())
		_, ok2 := p.sessions.Load(open[2].ID())
		if !ok1 && !ok2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle session was never closed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := open[1].Ping(ctx, nil); err == nil {
		t.Error("a closed idle session still answers")
	}
	// Room again.
	fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
}

// TestTrailingDataRefused: a POST holds one JSON-RPC message (or batch)
// and nothing after it. The SDK's decoder read the first value and
// ignored the rest: {"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1} and
// a tools/call followed by "xyz" were answered 200, on stateful and
// stateless requests alike. Nothing refused is recorded.
func TestTrailingDataRefused(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"go__test_simple_text","arguments":{}}}`
	stateless := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"go__test_simple_text","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	post := func(body string, statelessReq bool) int {
		h := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
		if statelessReq {
			h = map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Protocol-Version": "2026-07-28",
				"Mcp-Method": "tools/call", "Mcp-Name": "go__test_simple_text"}
		}
		resp, _ := postMCP(t, front, body, h)
		return resp.StatusCode
	}
	for _, c := range []struct {
		body      string
		stateless bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}`, false},
		{call + `{"x":1}`, false},
		{call + `xyz`, false},
		{call + `]`, false},
		{stateless + `{"x":1}`, true},
	} {
		before := l.size(t)
		if got := post(c.body, c.stateless); got != http.StatusBadRequest {
			t.Errorf("%.60s…: %d, want 400", c.body[len(c.body)-20:], got)
		}
		if l.size(t) != before {
			t.Errorf("a refused request was recorded")
		}
	}
	for _, c := range []struct {
		body      string
		stateless bool
	}{{call + " \r\n\t", false}, {stateless, true}} {
		if got := post(c.body, c.stateless); got != http.StatusOK {
			t.Errorf("a good request: %d, want 200", got)
		}
	}
}

// TestRefusalsSayWhy: a compressed body, JSON nested past what
// encoding/json reads, and a protocol revision that is not one are
// refused with what was wrong, and nothing is recorded. Before, gzip and
// nesting over 10,000 deep were "malformed", and any revision that sorts
// after 2026-07-28 ("garbage", "2099-01-01") went to the stateless
// handler, which asked for its _meta.
func TestRefusalsSayWhy(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}}}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"go__test_simple_text","arguments":{}}}`
	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"go__test_simple_text","arguments":{"n":` +
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}}`
	session := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	with := func(k, v string) map[string]string {
		h := maps.Clone(session)
		h[k] = v
		return h
	}
	for _, c := range []struct {
		name, body string
		header     map[string]string
		status     int
		want       string
	}{
		{"gzip", call, with("Content-Encoding", "gzip"), http.StatusUnsupportedMediaType, "is not supported; send the JSON-RPC message uncompressed"},
		{"too deep", deep, session, http.StatusBadRequest, "exceeded max depth"},
		{"garbage revision", call, with("Mcp-Protocol-Version", "garbage"), http.StatusBadRequest, `protocol version \"garbage\" is not supported`},
		{"later revision", call, with("Mcp-Protocol-Version", "2099-01-01"), http.StatusBadRequest, `protocol version \"2099-01-01\" is not supported`},
		{"fractional id", strings.Replace(call, `"id":1`, `"id":1.5`, 1), session, http.StatusBadRequest, "the request id 1.5 is not a string or an integer"},
		{"huge id", strings.Replace(call, `"id":1`, `"id":12345678901234567890`, 1), session, http.StatusBadRequest, "the request id 12345678901234567890 is not"},
		{"huge id, SDK path", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`, session, http.StatusBadRequest, "the request id 9007199254740993 is not"},
		{"minus zero id", strings.Replace(call, `"id":1`, `"id":-0`, 1), session, http.StatusBadRequest, "the request id -0 is not"},
	} {
		before := l.size(t)
		resp, body := postMCP(t, front, c.body, c.header)
		if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: HTTP %d %.300s; want %d saying %q", c.name, resp.StatusCode, body, c.status, c.want)
		}
		if l.size(t) != before {
			t.Errorf("%s: a refused request was recorded", c.name)
		}
	}
	if resp, body := postMCP(t, front, call, with("Content-Encoding", "identity")); resp.StatusCode != http.StatusOK {
		t.Errorf("Content-Encoding identity: HTTP %d %.200s", resp.StatusCode, body)
	}
}

// TestReadBody: a body is read whole whatever length it declared (none,
// its own, less, more), and cut one byte past the limit.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 100)
	for _, c := range []struct {
		declared, limit int64
		want            int
	}{
		{-1, 1000, 100}, {100, 1000, 100}, {10, 1000, 100}, {500, 1000, 100}, {0, 1000, 100},
		{-1, 50, 51}, {100, 50, 51}, {40, 50, 51}, {1 << 20, 2 << 20, 100},
	} {
		got, err := readBody(iotest.OneByteReader(strings.NewReader(body)), c.declared, c.limit)
		if err != nil || len(got) != c.want || string(got) != body[:c.want] {
			t.Errorf("declared %d, limit %d: %d bytes, %v; want %d", c.declared, c.limit, len(got), err, c.want)
		}
	}
	if _, err := readBody(iotest.ErrReader(errors.New("boom")), 10, 100); err == nil {
		t.Error("a failing read: no error")
	}
}

// TestBadRequestID: numeric ids the SDK would change are found wherever
// "id" appears, and only the top-level one counts.
func TestBadRequestID(t *testing.T) {
	for msg, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`:                                     "",
		`{"jsonrpc":"2.0","id":"1.5","method":"ping"}`:                                 "",
		`{"jsonrpc":"2.0","id":-9007199254740992,"method":"ping"}`:                     "",
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`:                      "9007199254740993",
		`{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`:                  "12345678901234567890",
		`{"jsonrpc":"2.0","id" : 1.5,"method":"ping"}`:                                 "1.5",
		`{"jsonrpc":"2.0","id":1e2,"method":"ping"}`:                                   "1e2",
		`{"jsonrpc":"2.0","id":-0.0,"method":"ping"}`:                                  "-0.0",
		`{"jsonrpc":"2.0","id":7,"method":"x","params":{"id":1.5}}`:                    "",
		`{"jsonrpc":"2.0","params":{"id":1.5},"id":99999999999999999999,"method":"x"}`: "99999999999999999999",
		`{"jsonrpc":"2.0","\u0069d":1.5,"method":"x"}`:                                 "1.5",
		`{"jsonrpc":"2.0","id":1.5,"method":"x"`:                                       "", // not JSON: the SDK refuses it
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`:                                    "-0",
		`{"jsonrpc":"2.0","id":0,"method":"ping"}`:                                     "",
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2.5}]`:        "2.5",
		` [{"id":1,"params":{"id":1.5}},{"id":-0}]`:                                    "-0",
		`{"jsonrpc":"2.0","id":1.5,"Id":1,"method":"x"}`:                               "1.5", // the SDK reads only "id"
		`[{"Id":0.5}]`:                   "",
		`[{"id":1,"params":{"id":1.5}}]`: "",
		`[1,{"id":1.5}]`:                 "", // no batch the SDK reads
	} {
		id, bad := badRequestID([]byte(msg))
		if bad != (want != "") || bad && string(id) != want {
			t.Errorf("%s: %q %v, want %q", msg, id, bad, want)
		}
	}
}

// FuzzBadRequestID: never a panic, and a message (or batch) is refused
// exactly when the top-level id of it (or of one of its messages) is a
// number that is not an integer within ±2^53, or -0.
func FuzzBadRequestID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`))
	f.Add([]byte(`{"id":"x","params":{"id":1e400}}`))
	f.Add([]byte(`{"id":9007199254740992}`))
	f.Add([]byte(`{"id":-0}`))
	f.Add([]byte(`[{"id":1},{"id":2.5,"params":{"id":3}}]`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		id, bad := badRequestID(msg)
		type message struct {
			ID json.RawMessage `json:"id"`
		}
		var batch []message
		if lead := bytes.TrimLeft(msg, " \t\r\n"); len(lead) == 0 || lead[0] != '[' || sdkDecode(msg, &batch) != nil {
			var m message
			if sdkDecode(msg, &m) != nil {
				if bad {
					t.Fatalf("refused id %s of a message that does not decode", id)
				}
				return
			}
			batch = []message{m}
		}
		var want json.RawMessage
		for _, m := range batch {
			isNum := len(m.ID) > 0 && (m.ID[0] == '-' || m.ID[0] >= '0' && m.ID[0] <= '9')
			if isNum && (!safeID(m.ID) || string(m.ID) == "-0") {
				want = m.ID
				break
			}
		}
		if bad != (want != nil) || bad && string(id) != string(want) {
			t.Fatalf("%s: refused %s %v, want %s", msg, id, bad, want)
		}
	})
}
