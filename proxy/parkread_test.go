package proxy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestParkReadsForNewerClient: TestParkForNewerClient for prompts/get and
// resources/read. A 2026-07-28 client (go-sdk's, which answers
// input_required results itself and retries) reads the prompt and the
// resource "ask_twice" of the fixture (a real stdio process, spoken to in
// 2025-11-25 only), which ask for elicitation and then sampling during
// the read. The client gets the server's answer; each read is three legs
// in the log, in order, each later one continuing the one before with
// the hash of its answers, and the log audits (the test log's cleanup
// runs log.Audit, which checks each read leg's continues).
func TestParkReadsForNewerClient(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	cs := connectHTTP(t, serveHTTP(t, p), "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != statelessProtocol {
		t.Fatalf("the client speaks %s", v)
	}
	ctx := context.Background()
	want := "tester: sampled by the test client"
	seen := filepath.Join(t.TempDir(), "seen")
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: map[string]string{"path": seen}})
	if err != nil {
		t.Fatalf("prompts/get that asks twice: %v", err)
	}
	if len(gp.Messages) != 1 || textOfContent(gp.Messages[0].Content) != want {
		t.Fatalf("prompts/get that asks twice: %s", mustJSON(gp))
	}
	if got := fileLines(t, seen); got != "elicited tester\nsampled sampled by the test client" {
		t.Errorf("the server got %q", got)
	}
	checkReadLegs(t, l, log.KindPromptGet, l.readReceipt(t, gp.Meta, log.KindPromptGet), 3)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fx+fixture:///ask_twice"})
	if err != nil {
		t.Fatalf("resources/read that asks twice: %v", err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].Text != want || rr.Contents[0].URI != "fx+fixture:///ask_twice" {
		t.Fatalf("resources/read that asks twice: %s", mustJSON(rr))
	}
	checkReadLegs(t, l, log.KindResourceRead, l.readReceipt(t, rr.Meta, log.KindResourceRead), 3)
	if w, n := p.parked.size(); w != 0 || n != 0 {
		t.Errorf("after the reads: %d rounds waiting, %d reads parked", w, n)
	}
}

// TestParkReadRetryChecks: TestParkRetryChecks for a prompts/get. The
// input_required answer the client gets is its leg's entry (the receipt
// in its _meta; result_sha256 over it as the client got it, less that
// receipt); a retry is taken only with a requestState the proxy issued
// for this actor's read of this prompt with these arguments, once, with
// answers of the right kind (and not as a tools/call's); every other is
// refused, writes nothing and reaches no server.
func TestParkReadRetryChecks(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-mallory": "mallory"})
	alice, mallory := handClient(t, url, "tok-alice"), handClient(t, url, "tok-mallory")
	seen := filepath.Join(t.TempDir(), "seen")
	args := map[string]string{"path": seen}
	ctx := context.Background()
	get := func(cs *mcp.ClientSession, args map[string]string, answers mcp.InputResponseMap, state string) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args, InputResponses: answers, RequestState: state})
	}
	round := func(res *mcp.GetPromptResult, err error) (*mcp.GetPromptResult, string) {
		t.Helper()
		if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
			t.Fatalf("prompts/get: %v %s, want one input request", err, mustJSON(res))
		}
		e := l.readReceipt(t, res.Meta, log.KindPromptGet)
		asGot := *res
		asGot.Meta = nil
		if b, _ := json.Marshal(&asGot); e.ResultSHA256 != definitionSum(b) {
			t.Errorf("the round's entry hashes %s, not the answer as the client got it (%s)", e.ResultSHA256, b)
		}
		for id := range res.InputRequests {
			return res, id
		}
		return res, ""
	}
	first, id := round(get(alice, args, nil, ""))
	if _, ok := first.InputRequests[id].(*mcp.ElicitParams); !ok {
		t.Fatalf("first round asks %T", first.InputRequests[id])
	}
	name := mcp.InputResponseMap{id: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "Ada"}}}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "nothing was forwarded") {
			t.Errorf("%s: %v, want it refused with nothing forwarded", what, err)
		}
	}
	before := l.size(t)
	_, err := get(mallory, args, name, first.RequestState)
	refused("another actor's retry", err)
	_, err = get(alice, args, name, "provlog-park-"+strings.Repeat("A", 43))
	refused("an unknown requestState", err)
	_, err = get(alice, args, name, "")
	refused("no requestState", err)
	_, err = get(alice, map[string]string{"path": seen + "2"}, name, first.RequestState)
	refused("other arguments", err)
	_, err = get(alice, args, mcp.InputResponseMap{id: &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "x"}}}, first.RequestState)
	refused("an answer of another kind", err)
	_, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "fx__ask_twice", Arguments: map[string]any{"path": seen}, InputResponses: name, RequestState: first.RequestState})
	refused("a tools/call with the read's state", err)
	if after := l.size(t); after != before {
		t.Errorf("the refused retries wrote %d entries", after-before)
	}
	if got := fileLines(t, seen); got != "" {
		t.Fatalf("before the right retry the server got %q", got)
	}

	second, sid := round(get(alice, args, name, first.RequestState))
	if got := fileLines(t, seen); got != "elicited Ada" {
		t.Fatalf("after the right retry the server got %q", got)
	}
	_, err = get(alice, args, name, first.RequestState)
	refused("a used requestState", err)
	final, err := get(alice, args, mcp.InputResponseMap{sid: &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "Hi Ada"}}}, second.RequestState)
	if err != nil || final.NeedsInput() || len(final.Messages) != 1 || textOfContent(final.Messages[0].Content) != "Ada: Hi Ada" {
		t.Fatalf("the last retry: %v %s", err, mustJSON(final))
	}
	checkReadLegs(t, l, log.KindPromptGet, l.readReceipt(t, final.Meta, log.KindPromptGet), 3)
	legsBy(t, l, "alice")
}

// TestParkReadTimeout: a parked prompts/get whose client does not come
// back within the timeout ends: the server's waiting request gets an
// error (the fixture's prompt then fails, so there is no closing leg:
// a read that fails has no entry), the read leaves the table, and a late
// retry is refused with nothing forwarded.
func TestParkReadTimeout(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{askingFixture(t, "fx")}, func(o *Options) { o.ParkTimeout = 200 * time.Millisecond })
	cs := handClient(t, serveTokens(t, p, map[string]string{"tok": "alice"}), "tok")
	seen := filepath.Join(t.TempDir(), "seen")
	args := map[string]string{"path": seen}
	first, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("prompts/get: %v %s", err, mustJSON(first))
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if w, n := p.parked.size(); w == 0 && n == 0 && fileLines(t, seen) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the parked read did not end")
		}
	}
	if got := fileLines(t, seen); got != "elicitation failed" {
		t.Errorf("the server got %q", got)
	}
	lateRetryRefused(t, l, seen, func() error {
		_, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "fx__ask_twice", Arguments: args, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{"1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "late"}}}})
		return err
	})
	if legs, _ := readLegsIn(t, l, log.KindPromptGet); len(legs) != 1 {
		t.Errorf("%d prompt.get entries, want the first leg's only", len(legs))
	}
}
