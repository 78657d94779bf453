package proxy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reapRig is a proxy in front of the fixture server (a real process) whose
// "append" tool appends to file, served over HTTP, for the tests of
// sessions the HTTP front closes.
type reapRig struct {
	p     *Proxy
	l     *testLog
	front string
	file  string
	// during runs in reapPass between its decision that a session is
	// idle and the closing (testingOnlyBeforeReap). The tests call
	// reapPass on their own goroutine, which alone reads and sets it.
	during func()
}

// newReapRig starts a reapRig. With holdForget, the proxy forgets no
// closed session until the test ends: every request in between falls in
// the window after a session is closed and before it is forgotten.
func newReapRig(t *testing.T, holdForget bool) *reapRig {
	r := &reapRig{l: newTestLog(t), file: filepath.Join(t.TempDir(), "appended")}
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureAppendEnv] = r.file
	r.p = startProxy(t, r.l, []ServerConfig{cfg}, nil)
	r.p.testingOnlyBeforeReap = func() {
		if r.during != nil {
			r.during()
		}
	}
	if holdForget {
		release := make(chan struct{})
		r.p.testingOnlyBeforeForget = func() { <-release }
		t.Cleanup(func() { close(release) }) // before the proxy closes
	}
	r.front = serveTokens(t, r.p, map[string]string{testToken: testActor, "bobs-token": "bob"})
	waitRouted(t, r.p, "fx__append", "fx__wait_file")
	return r
}

// session opens a 2025-11-25 session, whose calls take the fast path, and
// makes one call on it, which is over when session returns.
func (r *reapRig) session(t *testing.T) *mcp.ClientSession {
	t.Helper()
	cs := fastSession(t, r.p, connectHTTP(t, r.front, "2025-11-25", nil))
	r.append(t, cs, "opened")
	return cs
}

// append calls the fixture's append tool with text on cs, and waits until
// the POST is over at the proxy too.
func (r *reapRig) append(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError {
		t.Fatalf("append %q: %v %s", text, err, mustJSON(res))
	}
	waitIdle(t, r.p, cs.ID())
}

// reap runs one reaper pass as of an hour after now, with the default
// idle limit: every session idle now is past it.
func (r *reapRig) reap() {
	r.p.reapPass(time.Now().Add(time.Hour), DefaultSessionIdle, map[*mcp.ServerSession]time.Time{})
}

// appended returns what the fixture's append tool appended.
func (r *reapRig) appended(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClosedSessionIsUnknown: from the moment the front closes a session
// (the reaper, or its client's DELETE) a tools/call naming it is answered
// 404, as for an unknown session, and is neither recorded nor forwarded.
// The proxy forgets a closed session only once the SDK's has ended, on
// another goroutine; in between, the fast path served such a call on the
// closed session. The test holds that goroutine, so that every request it
// makes falls in the window.
func TestClosedSessionIsUnknown(t *testing.T) {
	r := newReapRig(t, true)
	for _, tc := range []struct {
		name  string
		close func(t *testing.T, cs *mcp.ClientSession)
	}{
		{"Reaped", func(t *testing.T, cs *mcp.ClientSession) { r.reap() }},
		{"Deleted", func(t *testing.T, cs *mcp.ClientSession) {
			if got := r.delete(t, cs, testToken); got != http.StatusNoContent {
				t.Fatalf("DELETE of the session: HTTP %d, want 204", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := r.session(t)
			tc.close(t, cs)
			if _, ok := r.p.sessions.Load(cs.ID()); !ok {
				t.Fatal("the proxy forgot the closed session: the test is not in the window it is for")
			}
			before, appended := r.l.size(t), r.appended(t)
			text := "after the " + strings.ToLower(tc.name) + " close"
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__append","arguments":{"text":%q}}}`, text)
			resp, b := postMCP(t, r.front, body, map[string]string{
				"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25",
			})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("a tools/call on the closed session: HTTP %d %q, want 404", resp.StatusCode, b)
			}
			if got := r.l.size(t); got != before {
				t.Errorf("the log grew by %d entries for a call on a closed session", got-before)
			}
			if got := r.appended(t); got != appended {
				t.Errorf("a call on a closed session was forwarded: the fixture appended %q", strings.TrimPrefix(got, appended))
			}
		})
	}
}

// TestAnotherActorsDelete: a DELETE naming a session by an actor not its
// own is refused (403) and closes nothing: the session still takes calls.
func TestAnotherActorsDelete(t *testing.T) {
	r := newReapRig(t, true)
	cs := r.session(t)
	if got := r.delete(t, cs, "bobs-token"); got != http.StatusForbidden {
		t.Errorf("bob's DELETE of alice's session: HTTP %d, want 403", got)
	}
	r.append(t, cs, "after bob's DELETE")
}

// delete sends a DELETE of cs's session with token, and returns its status.
func (r *reapRig) delete(t *testing.T, cs *mcp.ClientSession, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, r.front, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReapSparesAdmittedCalls: the reaper closes a session only if no
// request of it was admitted since it judged the session idle. A call
// admitted just before the close is carried out and recorded, and its
// session stays open; so does the session of a call made and over in
// that moment (it was not idle). The reaper judged a session by one look
// at its POSTs in progress and its clock, then closed it: a call
// admitted in between was cut off as the session ended, and a session
// used in between was closed.
func TestReapSparesAdmittedCalls(t *testing.T) {
	r := newReapRig(t, false)
	ctx := context.Background()
	t.Run("InProgress", func(t *testing.T) {
		cs := r.session(t)
		flag := filepath.Join(t.TempDir(), "flag")
		type answer struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		r.during = func() {
			admitted := r.p.fastCalls.Load() + 1
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__wait_file", Arguments: map[string]any{"path": flag}})
				done <- answer{res, err}
			}()
			// The fast path counts a call once its POST was admitted.
			for deadline := time.Now().Add(30 * time.Second); r.p.fastCalls.Load() < admitted; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) { // a failure guard only
					t.Fatal("the call was not admitted")
				}
			}
		}
		defer func() { r.during = nil }()
		r.reap()
		if err := os.WriteFile(flag, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var a answer
		select {
		case a = <-done:
		case <-time.After(30 * time.Second): // a failure guard only
			t.Fatal("the admitted call did not end")
		}
		if a.err != nil || a.res.IsError || textOf(a.res) != "found "+flag {
			t.Fatalf("a call admitted before the reaper's close: %v %s", a.err, mustJSON(a.res))
		}
		e, _ := r.l.checkReceipt(t, metaReceipt(a.res.Meta))
		if e.Fields["is_error"] != false || e.Fields["error"] != nil {
			t.Errorf("the admitted call's entry: %v", e.Fields)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("the session of a call in progress was closed: %v", err)
		}
	})
	t.Run("Over", func(t *testing.T) {
		cs := r.session(t)
		r.during = func() { r.append(t, cs, "during the pass") }
		r.reap()
		r.during = nil
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Errorf("a session used as the reaper judged it idle was closed: %v", err)
		}
		// With the session idle again (the list's POST over at the proxy
		// too, not only at the client), the next pass closes it.
		waitIdle(t, r.p, cs.ID())
		r.reap()
		if _, err := cs.ListTools(ctx, nil); err == nil {
			t.Error("an idle session was not closed")
		}
	})
}
