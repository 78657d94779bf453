package proxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestBridgedLegsOneArguments: the legs of a call the proxy bridges for
// an older client record its arguments as the first leg did, though the
// client's answer between them (a color, which the redact list names)
// made the server remember a value the arguments hold: recorded anew
// each leg, the later legs' arguments were scrubbed of it and the first's
// not, and the audit found a leg continuing a call with other arguments.
func TestBridgedLegsOneArguments(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}, Protocol: statelessProtocol, Redact: []string{"color"}}}, nil)
	ctx := context.Background()
	cs := connectInMemory(t, p, bridgeClient("older-client", make(chan string, 16)))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_input_required_result_multi_round", Arguments: map[string]any{"note": "green"}})
	if err != nil || res.IsError {
		t.Fatalf("multi-round: %v %s", err, mustJSON(res))
	}
	checkLegs(t, l, "test_input_required_result_multi_round", "older-client", "2025-11-25", 3)
}

// TestClientRetryTiedAfterAnotherCallsValue: a 2026-07-28 client's own
// retry of a server's input_required result is tied to the leg it
// answers, and recorded with its arguments, though another call made
// the server remember a value the arguments hold in between: the tie was
// keyed on the arguments as recorded, now scrubbed of that value, and the
// retry was recorded as a call of its own.
func TestClientRetryTiedAfterAnotherCallsValue(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}, Protocol: statelessProtocol, Redact: []string{"color"}}}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	alice, bob := handClient(t, url, "tok-alice"), handClient(t, url, "tok-bob")
	ctx := context.Background()
	const tool = "go__test_input_required_result_multi_round"
	args := map[string]any{"note": "green"}
	first, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first leg: %v %s", err, mustJSON(first))
	}
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "go__test_simple_text", Arguments: map[string]any{"color": "green"}}); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
	answers := mcp.InputResponseMap{}
	for id := range first.InputRequests {
		answers[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}
	}
	second, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, InputResponses: answers, RequestState: first.RequestState})
	if err != nil || !second.NeedsInput() {
		t.Fatalf("second leg: %v %s", err, mustJSON(second))
	}
	calls, _ := legsOf(t, l, "test_input_required_result_multi_round", "hand-client")
	if len(calls) < 2 || calls[1].Continues == 0 || string(calls[1].Args) != string(calls[0].Args) {
		t.Errorf("alice's retry is not recorded as her call's second leg: %s", mustJSON(calls))
	}
}

// TestClientRetryTieHeldAgainstAnotherActor: a 2026-07-28 client's own
// retry of a server's input_required result stays tied to the leg it
// answers (continues) though another actor, meanwhile, gets as many
// input_required results as the proxy remembers in all (maxRetryWaits):
// the table was one for all actors, oldest out first, so mallory's 4,096
// first legs pushed out alice's, and her retry was recorded as a call of
// its own.
func TestClientRetryTieHeldAgainstAnotherActor(t *testing.T) {
	l := newTestLog(t)
	p := startProxy(t, l, []ServerConfig{{ID: "go", Command: []string{goEverything(t)}, Protocol: statelessProtocol}}, nil)
	url := serveTokens(t, p, map[string]string{"tok-alice": "alice", "tok-mallory": "mallory"})
	alice, mallory := handClient(t, url, "tok-alice"), handClient(t, url, "tok-mallory")
	ctx := context.Background()
	const tool = "go__test_input_required_result_multi_round"
	first, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"note": "alice"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("alice's first leg: %v %s", err, mustJSON(first))
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < maxRetryWaits; i += workers {
				res, err := mallory.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"note": fmt.Sprintf("m%d", i)}})
				if err != nil || !res.NeedsInput() {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of mallory's %d calls got no input_required result", n, maxRetryWaits)
	}
	answers := mcp.InputResponseMap{}
	for id := range first.InputRequests {
		answers[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}
	}
	second, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"note": "alice"}, InputResponses: answers, RequestState: first.RequestState})
	if err != nil || !second.NeedsInput() {
		t.Fatalf("alice's second leg: %v %s", err, mustJSON(second))
	}
	var legs []*log.CallEntry
	for i := uint64(1); i < l.size(t); i++ {
		if e := mustParse(t, l.entry(t, i)); e.Kind == log.KindCall && e.Actor == "alice" {
			c, err := log.ParseCall(e)
			if err != nil {
				t.Fatal(err)
			}
			legs = append(legs, c)
		}
	}
	if len(legs) != 2 || legs[1].Continues == 0 {
		t.Errorf("after mallory's %d input_required results, alice's retry continues %d, want her first leg's call.result (%d legs)", maxRetryWaits, legs[len(legs)-1].Continues, len(legs))
	}
}
