package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The requests of each path, under one id: a plain tools/call (the fast
// path's), and what goes to the SDK (a call with a progress token, a
// ping).
var (
	fastHang = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"SERVER__hang","arguments":{}}}`
	sdkHang  = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"SERVER__hang","arguments":{},"_meta":{"progressToken":"p"}}}`
	sdkPing  = `{"jsonrpc":"2.0","id":7,"method":"ping"}`
)

// crossCases are a request in progress and one under its id by the other
// path.
var crossCases = []struct{ name, first, second string }{
	{"fast then SDK call", fastHang, sdkHang},
	{"fast then ping", fastHang, sdkPing},
	{"SDK call then fast", sdkHang, fastHang},
}

// TestFastPathDuplicateIDAcrossPaths: on HTTP, a request under the id of
// one in progress on the session, by either path (the fast path's or the
// SDK's), is refused, neither recorded nor made. Each path knew only its
// own calls: both were made and recorded, and the client had two answers
// under one id. The refusal is the SDK's, whichever path refuses and
// whether the session's answers are JSON (2025-06-18) or resumable event
// streams (2025-11-25): 400, the error under the id, in JSON. The fast
// path answered 200, in its call's JSON body or on an event stream it
// had opened (and kept for a resume).
func TestFastPathDuplicateIDAcrossPaths(t *testing.T) {
	const refusal = `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"duplicate in-flight request ID 7"}}`
	cases := append(crossCases[:len(crossCases):len(crossCases)], struct{ name, first, second string }{"fast then fast", fastHang, fastHang})
	for _, protocol := range []string{"2025-06-18", "2025-11-25"} {
		for _, tc := range cases {
			t.Run(protocol+"/"+tc.name, func(t *testing.T) {
				p, l, noted := hangProxy(t, "fx")
				front, header := hangFront(t, p, protocol)
				firstDone := make(chan string, 1)
				go func() { _, b := postMCP(t, front, onServer(tc.first, "fx"), header); firstDone <- b }()
				waitFor(t, "the first call to start", func() bool { return noted("started") == 1 })
				before := l.size(t)
				type answer struct {
					status int
					ctype  string
					body   string
				}
				secondDone := make(chan answer, 1)
				go func() {
					resp, b := postMCP(t, front, onServer(tc.second, "fx"), header)
					secondDone <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), b}
				}()
				var got answer
				waitFor(t, "the second request to be answered or made", func() bool {
					select {
					case got = <-secondDone:
						return true
					default:
						return noted("started") > 1
					}
				})
				if want := (answer{http.StatusBadRequest, "application/json", refusal}); got != want || noted("started") > 1 {
					t.Errorf("the request under the id of a request in progress: %+v (the server started %d calls), want %+v", got, noted("started"), want)
				}
				if got := l.size(t); got != before {
					t.Errorf("the refused request grew the log by %d entries", got-before)
				}
				postMCP(t, front, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, header)
				if b := <-firstDone; !strings.Contains(b, `"id":7`) {
					t.Errorf("the first request, cancelled: %q", b)
				}
			})
		}
	}
}

// onServer is request with SERVER the fixture's server id.
func onServer(request, server string) string { return strings.ReplaceAll(request, "SERVER", server) }

// TestPipeFrontDuplicateIDAcrossPaths: on stdio, a request under the id of
// one in progress by the other path (the pipe front's own or the SDK's)
// is refused under id null, neither recorded nor made. Each path knew
// only its own calls: both were made and recorded, and the client had two
// answers under one id.
func TestPipeFrontDuplicateIDAcrossPaths(t *testing.T) {
	for _, tc := range crossCases {
		t.Run(tc.name, func(t *testing.T) {
			p, l, noted := hangProxy(t, "f")
			pc := newPipeClient(t, p)
			pc.send(onServer(tc.first, "f"))
			waitFor(t, "the first call to start", func() bool { return noted("started") == 1 })
			before := l.size(t)
			pc.send(onServer(tc.second, "f"))
			line := make(chan string, 1)
			go func() { line <- string(pc.read()) }()
			var got string
			waitFor(t, "the second request to be answered or made", func() bool {
				select {
				case got = <-line:
					return true
				default:
					return noted("started") > 1
				}
			})
			if !strings.Contains(got, `"id":null`) || !strings.Contains(got, "duplicate in-flight request ID") {
				t.Errorf("the request under the id of a request in progress: %q, want a refusal", got)
			}
			if got := l.size(t); got != before || noted("started") != 1 {
				t.Errorf("the refused request grew the log by %d entries; the server started %d calls", got-before, noted("started"))
			}
		})
	}
}

// TestIDFreeOnceSDKAnswered: the id of a request the SDK served is free
// for the other path as soon as its answer is out, on either front.
func TestIDFreeOnceSDKAnswered(t *testing.T) {
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping"}`
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"f__ok","arguments":{}}}`
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "f")}, nil)
	t.Run("pipe", func(t *testing.T) {
		pc := newPipeClient(t, p)
		for i := range 20 {
			for _, req := range []string{ping, call} {
				pc.send(req)
				if got := string(pc.read()); !strings.Contains(got, `"id":9,"result"`) {
					t.Fatalf("round %d: %s: %.300s", i, req, got)
				}
			}
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		front := serveHTTP(t, p)
		cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		header := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
		for i := range 20 {
			for _, req := range []string{ping, call} {
				if _, got := postMCP(t, front, req, header); !strings.Contains(got, `"id":9,"result"`) {
					t.Fatalf("round %d: %s: %.300s", i, req, got)
				}
			}
		}
	})
}

// TestDuplicateIDWords: the refusal names the id as go-sdk's streamable
// handler does ("duplicate in-flight request ID %v" of the id it
// decoded): a string without its quotes, a number as the integer it is.
// It quoted a string id ("\"a\"") where go-sdk does not.
func TestDuplicateIDWords(t *testing.T) {
	for _, raw := range []string{`7`, `7.0`, `1e2`, `"a"`, `"\u0061b"`, `"x y"`, `-3`} {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("duplicate in-flight request ID %v", id.Raw()) // go-sdk's streamable.go
		if got := duplicateID(json.RawMessage(raw)).Message; got != want {
			t.Errorf("id %s: %q, want %q", raw, got, want)
		}
	}
}
