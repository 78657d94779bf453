package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFastPathHTTP covers what the fast path (httpfront.go) does on its own,
// against npm's server-everything over streamable HTTP: cancellation and
// timeouts of raw downstream calls, sessions kept to their actor, the
// proxy's idle clock, and a log that cannot record. (TestReferenceServers
// runs the common scenarios over both fronts.)
func TestFastPathHTTP(t *testing.T) {
	l := newTestLog(t)
	url := startEverythingHTTP(t)
	slow := ServerConfig{ID: "slow", URL: url, Timeout: 500 * time.Millisecond}
	p := startProxy(t, l, []ServerConfig{{ID: "evh", URL: url}, slow}, nil)
	front := serveTokens(t, p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	ctx := context.Background()
	sum := &mcp.CallToolParams{Name: "evh__get-sum", Arguments: map[string]any{"a": 2, "b": 3}}

	fast := func(t *testing.T, want uint64, f func()) {
		t.Helper()
		before := p.fastCalls.Load()
		f()
		if got := p.fastCalls.Load() - before; got != want {
			t.Errorf("%d calls took the fast path, want %d", got, want)
		}
	}

	t.Run("Cancellation", func(t *testing.T) {
		before := l.size(t)
		fast(t, 1, func() {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "evh__trigger-long-running-operation", Arguments: map[string]any{"duration": 20, "steps": 20}})
			if err == nil {
				t.Fatal("a cancelled call succeeded")
			}
		})
		// The entry, not how soon the client's call returned (its SDK
		// returns at its own deadline whatever the proxy does), shows
		// that the proxy gave the call up: one it ran on would be
		// recorded with the server's result 20 s later.
		e, _ := l.callAt(t, before)
		if e.Fields["error"] != "cancelled by the client" || e.Fields["is_error"] != true || e.Actor != testActor {
			t.Errorf("cancelled call entry: %v", e.Fields)
		}
		res, err := cs.CallTool(ctx, sum)
		if err != nil || !strings.Contains(textOf(res), "5") {
			t.Fatalf("after cancelling: %v %s", err, mustJSON(res))
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		var err error
		fast(t, 1, func() {
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow__trigger-long-running-operation", Arguments: map[string]any{"duration": 5, "steps": 5}})
		})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || !strings.Contains(we.Message, `server "slow" did not answer trigger-long-running-operation within 500ms`) {
			t.Fatalf("timed out call: %v", err)
		}
		var data map[string]string
		json.Unmarshal(we.Data, &data)
		e, _ := l.checkReceipt(t, data[ReceiptKey])
		if e.Fields["is_error"] != true || !strings.Contains(e.Fields["error"].(string), "did not answer") {
			t.Errorf("timed out call entry: %v", e.Fields)
		}
	})

	t.Run("ASessionIsItsActorsOnly", func(t *testing.T) {
		before := l.size(t)
		body := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"evh__get-sum","arguments":{"a":1,"b":1}}}`
		for _, tc := range []struct {
			token string
			want  int
		}{
			{"bobs-token", http.StatusForbidden}, // another actor's session
			{"", http.StatusUnauthorized},
		} {
			fast(t, 0, func() {
				h := map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
				if tc.token != "" {
					h["Authorization"] = "Bearer " + tc.token
				}
				resp, b := postMCP(t, front, body, h)
				if resp.StatusCode != tc.want {
					t.Errorf("token %q on alice's session: HTTP %d %s, want %d", tc.token, resp.StatusCode, b, tc.want)
				}
			})
		}
		if l.size(t) != before {
			t.Errorf("a refused request was recorded")
		}
	})

	t.Run("IdleSessionsAreClosed", func(t *testing.T) {
		idle := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		busy := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
		if _, err := idle.CallTool(ctx, sum); err != nil {
			t.Fatal(err)
		}
		// The proxy touches the clock again as the POST ends, which may
		// be after the client has its answer. (The standalone GET was
		// answered within Connect, before the session was noted, so it
		// touched nothing.)
		waitIdle(t, p, idle.ID())
		since := time.Now()
		// busy calls on the fast path only, which the SDK's idle timer
		// would not see.
		fast(t, 1, func() {
			if _, err := busy.CallTool(ctx, sum); err != nil {
				t.Fatalf("a busy session's call failed: %v", err)
			}
		})
		// One pass, as of exactly the limit after since: idle's last
		// request is older than that, busy's is not. Requests through
		// the SDK's handler show what the pass did (Close forgets the
		// session there before it returns).
		const limit = 10 * time.Minute
		p.reapPass(since.Add(limit), limit, map[*mcp.ServerSession]time.Time{})
		if _, err := idle.ListTools(ctx, nil); err == nil {
			t.Fatalf("a session idle for longer than the %s limit still works", limit)
		} else {
			t.Logf("idle session: %v", err)
		}
		if _, err := busy.ListTools(ctx, nil); err != nil {
			t.Fatalf("the busy session was closed: %v", err)
		}
		if _, err := busy.CallTool(ctx, sum); err != nil {
			t.Fatalf("the busy session's next call failed: %v", err)
		}
	})

	t.Run("StorageFailure", func(t *testing.T) {
		cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil)) // the reaper above closed the first
		before := l.size(t)
		l.store.fail.Store(true)
		var err error
		fast(t, 1, func() { _, err = cs.CallTool(ctx, sum) })
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || !strings.Contains(we.Message, "was not made, as the log cannot record it") {
			t.Fatalf("call with failing storage: %v", err)
		}
		if got := l.size(t); got != before {
			t.Errorf("log grew by %d", got-before)
		}
	})
}

// waitIdle waits until no POST of session id is in progress at the proxy
// any more.
func waitIdle(t *testing.T, p *Proxy, id string) {
	t.Helper()
	v, ok := p.sessions.Load(id)
	if !ok {
		t.Fatalf("session %s is not open", id)
	}
	fs := v.(*frontSession)
	deadline := time.Now().Add(10 * time.Second) // a failure guard only
	for fs.inProgress() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session %s still has a POST in progress", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fastSession waits until the proxy has noted cs's session as initialized:
// the SDK handles the client's notifications/initialized on its own time,
// and until then the session's calls go through the SDK's path (which is
// right, but would make the counts of fast calls in tests racy).
func fastSession(t testing.TB, p *Proxy, cs *mcp.ClientSession) *mcp.ClientSession {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := p.sessions.Load(cs.ID()); ok {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s was never noted as initialized", cs.ID())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFastPathLeavesTheRestToTheSDK: what the fast path does not take
// reaches the SDK's handler with its body intact.
func TestFastPathLeavesTheRestToTheSDK(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "evh", URL: startEverythingHTTP(t)}}, nil)
	front := serveHTTP(t, p)
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	post := func(body, version string) (int, string) {
		resp, b := postMCP(t, front, body, map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": version, "Authorization": "Bearer " + testToken})
		return resp.StatusCode, b
	}
	before := l.size(t)
	for _, tc := range []struct{ name, body, version, want string }{
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope__x"}}`, "2025-11-25", "nope__x"},
		{"own tool", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"provlog__status"}}`, "2025-11-25", "servers"},
		{"batch", `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"evh__echo","arguments":{"message":"m"}}}]`, "2025-11-25", ""},
		{"extra member", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"evh__echo","arguments":{"message":"m"}},"x":1}`, "2025-11-25", ""},
		{"bad version", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"evh__echo","arguments":{"message":"m"}}}`, "1999-01-01", "Unsupported protocol version"},
		{"arguments not an object", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"evh__echo","arguments":[1]}}`, "2025-11-25", ""},
		{"ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, "2025-11-25", `"result":{}`},
	} {
		n := p.fastCalls.Load()
		code, body := post(tc.body, tc.version)
		if p.fastCalls.Load() != n {
			t.Errorf("%s: took the fast path", tc.name)
		}
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: HTTP %d %s, want it to say %q", tc.name, code, body, tc.want)
		}
		t.Logf("%s: HTTP %d %.200s", tc.name, code, body)
	}
	// The calls the SDK served were recorded by the ordinary path; the
	// unknown tool, the own tool, the ping and the refused ones were not.
	t.Logf("log grew by %d", l.size(t)-before)
}
