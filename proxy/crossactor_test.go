package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestParkAsksStayWithTheirActor: a stdio server spoken to in 2025-11-25
// does not say which call its request is for, and each 2026-07-28 client's
// call is a client of its own: with alice's call parked on the server, a
// request the server makes while bob's call is in progress too cannot be
// told to be either's, and reaches neither (the server gets an error and
// bob's call ends with what the server made of it). Once bob's call is
// over, the server's next request, made for alice's call, comes to alice's
// retry as her call's next round.
//
// Before, sessionless calls were taken for one session's calls and a
// server's request went to the latest: the request made for alice's call
// went to bob's (live: bob's answer finished alice's call, and the log
// said it had gone to bob's), and alice's retry waited for a round that
// never came.
func TestParkAsksStayWithTheirActor(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	dir := t.TempDir()
	aliceArgs := map[string]any{"path": filepath.Join(dir, "alice")}
	bobArgs := map[string]any{"path": filepath.Join(dir, "bob")}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	aliceFirst := parkedRound(t, alice, aliceArgs)
	bobRes, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: bobArgs})
	switch {
	case err != nil:
		t.Fatalf("bob's call: %v", err)
	case bobRes.NeedsInput() || !bobRes.IsError || !strings.Contains(textOf(bobRes), "cannot tell which one"):
		t.Errorf("bob's call while alice's is parked: %s, want the server's error for a request that cannot be told to be his", mustJSON(bobRes))
	}
	if got := fileLines(t, filepath.Join(dir, "bob")); got != "elicitation failed" {
		t.Errorf("the server saw for bob's call: %q", got)
	}
	var id string
	for k := range aliceFirst.InputRequests {
		id = k
	}
	aliceSecond, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: aliceArgs, RequestState: aliceFirst.RequestState,
		InputResponses: mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}}})
	switch {
	case err != nil:
		t.Fatalf("alice's retry: %v", err)
	case !strings.Contains(mustJSON(aliceSecond.InputRequests), "Greet Ada"):
		t.Errorf("alice's retry: %s, want her call's next round asking to greet Ada", mustJSON(aliceSecond))
	}
}

// TestForeignPOSTLeavesSessionIDsAlone: bob's POST on alice's session is
// refused as the SDK refuses it (403, session user mismatch), whatever its
// id, and touches nothing of alice's session.
//
// Before, a POST under the id of one of alice's requests in progress was
// answered 400 "duplicate in-flight request ID 7" instead: holdIDs claimed
// the POST's ids in the session's set before the SDK checked the actor, so
// bob learnt which ids alice had in flight, and while bob's POST held an
// id alice's own request under it was refused as a duplicate.
func TestForeignPOSTLeavesSessionIDsAlone(t *testing.T) {
	p, _, noted := hangProxy(t, "fx")
	front := serveTokens(t, p, map[string]string{testToken: "alice", "tok-bob": "bob"})
	t.Cleanup(func() { p.Close() })
	waitRouted(t, p, "fx__hang")
	cs := fastSession(t, p, connectHTTP(t, front, "2025-11-25", nil))
	alice := map[string]string{"Authorization": "Bearer " + testToken, "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	resp := postMCPStream(t, front, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__hang","arguments":{}}}`, alice)
	defer resp.Body.Close()
	waitFor(t, "alice's call to start", func() bool { return noted("started") == 1 })

	bob := map[string]string{"Authorization": "Bearer tok-bob", "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	for _, id := range []string{"7", "8"} {
		resp, body := postMCP(t, front, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`, bob)
		if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "in-flight") {
			t.Errorf("bob's POST with id %s on alice's session: %d %q, want 403 session user mismatch", id, resp.StatusCode, body)
		}
	}
}

// TestForeignRequestsKeepNoSessionAlive: bob's requests on alice's
// session, each refused (403), do not count as its use: once alice has
// left it idle past the limit it is closed, however often bob knocked.
// Before, every request with its id touched the session's clock before
// its actor was checked, so bob could keep alice's abandoned sessions
// open, and counting against her share, without end.
func TestForeignRequestsKeepNoSessionAlive(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{fixtureServerConfig(t, "fx")}, nil)
	front := serveTokens(t, p, map[string]string{testToken: "alice", "tok-bob": "bob"})
	waitRouted(t, p, "fx__echo")
	alice := fastSession(t, p, connectHTTPAs(t, front, testToken, "2025-11-25", nil))
	waitIdle(t, p, alice.ID())
	since := time.Now()
	bob := map[string]string{"Authorization": "Bearer tok-bob", "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-11-25"}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		resp := requestMCP(t, method, front, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, bob)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("bob's %s on alice's session: HTTP %d, want 403", method, resp.StatusCode)
		}
	}
	const limit = 10 * time.Minute
	p.reapPass(since.Add(limit), limit, map[*mcp.ServerSession]time.Time{})
	if _, err := alice.ListTools(context.Background(), nil); err == nil {
		t.Error("alice's session, idle past the limit but for bob's refused requests, was not closed")
	}
}

// TestRedactedValuesNoOracleAcrossActors: what bob's entries record of his
// call (its arguments, its kept result) does not depend on alice's
// redacted values. Every actor may read every entry, so an entry of bob's
// that marks which of his words is a value alice sent under a redacted
// field tells bob alice's secret. Alice's own later call quoting her
// value is still scrubbed of it.
//
// Before, recordedArgs scrubbed a call's arguments of the server's recent
// redacted values, whoever sent them, so bob sent a list of guesses and
// read in his own entry which one was alice's password ("letmein
// [redacted] qwerty"); and his echoed result was kept scrubbed, under a
// hash of its own that his call.result named (retained_sha256).
func TestRedactedValuesNoOracleAcrossActors(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "fx")
	cfg.Redact = []string{"password"}
	cfg.Retain = RetainFull
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	url := serveTokens(t, p, map[string]string{testToken: "alice", "tok-bob": "bob"})
	alice := connectHTTPAs(t, url, testToken, "2025-11-25", nil)
	bob := connectHTTPAs(t, url, "tok-bob", "2025-11-25", nil)
	ctx := context.Background()
	const secret = "Tr0ub4dor-alice"
	call := func(cs *mcp.ClientSession, args map[string]any) {
		t.Helper()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__echo", Arguments: args}); err != nil {
			t.Fatal(err)
		}
	}
	call(alice, map[string]any{"password": secret})
	guesses := "letmein " + secret + " qwerty"
	call(bob, map[string]any{"note": guesses})
	call(alice, map[string]any{"note": "mine is " + secret})
	var bobs, alices int
	for i := uint64(1); i < l.size(t); i++ {
		e := mustParse(t, l.entry(t, i))
		switch {
		case e.Kind == log.KindCall && e.Actor == "bob":
			bobs++
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(c.Args), `{"note":"`+guesses+`"}`; got != want {
				t.Errorf("bob's call entry records his arguments as %s, want %s (as sent: none of his fields is redacted)", got, want)
			}
		case e.Kind == log.KindCallResult && e.Actor == "bob":
			r, err := log.ParseCallResult(e)
			if err != nil {
				t.Fatal(err)
			}
			if r.RetainedSHA256 != "" {
				t.Errorf("bob's echoed result was kept scrubbed (retained_sha256 %s): it held alice's value", r.RetainedSHA256)
			}
		case e.Kind == log.KindCall && e.Actor == "alice":
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(c.Args), secret) {
				t.Errorf("alice's call entry holds her redacted value: %s", c.Args)
			}
			if strings.Contains(string(c.Args), "mine is") {
				alices++
			}
		}
	}
	if bobs != 1 || alices != 1 {
		t.Errorf("%d call entries of bob's, %d of alice's quoting her value; want 1 each", bobs, alices)
	}
}

// TestKeptStreamsPerActor: the answer of alice's call, whose client lost
// its stream before the answer came, stays for her to resume however many
// undelivered answers bob leaves behind: one actor's streams cannot push
// another's out of the kept streams' memory (as sessions, parked calls and
// subscriptions have a share per actor).
//
// Before, bob's did: the kept streams were one list over all sessions,
// oldest dropped first (keep, keptStreamBytes), so bob's big answers,
// each dropped unread, pushed out alice's older one and her resume was
// refused (400, "not kept"). Now the actor whose streams take the most
// loses its own oldest (keptStreams.victim).
func TestKeptStreamsPerActor(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	slow := func(text string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			time.Sleep(300 * time.Millisecond) // the client has dropped its stream by then
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		}
	}
	srv.AddTool(&mcp.Tool{Name: "small", InputSchema: obj}, slow("alice's answer"))
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: obj}, slow(bigText))
	down := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(down.Close)
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "ev", URL: down.URL}}, nil)
	front := serveTokens(t, p, map[string]string{testToken: "alice", "tok-bob": "bob"})
	alice := fastSession(t, p, connectHTTPAs(t, front, testToken, "2025-11-25", nil))
	bob := fastSession(t, p, connectHTTPAs(t, front, "tok-bob", "2025-11-25", nil))

	// dropped calls tool on session sid with token, reads the priming
	// event, drops the stream and returns the event's id once the
	// answer is kept undelivered.
	dropped := func(token, sid, tool string) string {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ev__` + tool + `","arguments":{}}}`
		resp := postMCPStream(t, front, body, map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
		st := &sseStream{bufio.NewReader(resp.Body), resp.Body}
		first := st.next(t)
		st.Close()
		waitFor(t, "the dropped answer to be kept", func() bool { return keptAs(p, sid, first["id"]) != "in progress" })
		return first["id"]
	}
	aliceID := dropped(testToken, alice.ID(), "small")
	for range keptStreamBytes/len(bigText) + 2 {
		dropped("tok-bob", bob.ID(), "big")
	}
	if got := keptAs(p, alice.ID(), aliceID); got != "waiting" {
		t.Errorf("alice's undelivered answer is %s after bob's, want it waiting for her", got)
	}
	resumed := getResume(t, front, alice.ID(), aliceID, http.StatusOK)
	defer resumed.Close()
	if ev := resumed.next(t); !strings.Contains(ev["data"], "alice's answer") {
		t.Errorf("alice resumed %q", ev)
	}
}

// postMCPStream POSTs body with header and returns the response unread.
func postMCPStream(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	resp := requestMCP(t, http.MethodPost, url, body, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	return resp
}

// TestActorSecretsBounded: a server keeps at most maxSecretActors actors'
// values apart, the longest known giving way; an actor with none scrubs
// nothing, and nothing remembered for one actor scrubs another's text.
func TestActorSecretsBounded(t *testing.T) {
	var a actorSecrets
	for i := range maxSecretActors + 1 {
		a.remember(fmt.Sprint("actor", i), []string{fmt.Sprint("secret-of-", i)})
	}
	if got := a.of("actor0").scrub("secret-of-0"); got != "secret-of-0" {
		t.Errorf("the first actor's values outlived the bound: %q", got)
	}
	if got := a.of("actor1").scrub("x secret-of-1 y"); got == "x secret-of-1 y" {
		t.Errorf("the second actor's value is not scrubbed from its own text: %q", got)
	}
	if got := a.of("actor1").scrub("secret-of-2"); got != "secret-of-2" {
		t.Errorf("another actor's value was scrubbed: %q", got)
	}
	if len(a.m) != maxSecretActors || len(a.order) != maxSecretActors || !noSecrets.none() {
		t.Errorf("%d actors kept (%d in order), noSecrets empty %v", len(a.m), len(a.order), noSecrets.none())
	}
}
