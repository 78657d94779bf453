package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// addRounds gives the fixture (run with fixtureEnv "rounds") a prompt
// "rounds" and a resource "fixture:///rounds" that, on a 2026-07-28
// session, ask for input twice (SEP-2322): a name, then a colour, with
// the name carried in requestState; the third round answers "NAME likes
// COLOUR".
func addRounds(s *mcp.Server) {
	type ask struct {
		responses mcp.InputResponseMap
		state     string
	}
	round := func(a ask) (mcp.InputRequestMap, string, string) {
		answer := func(key string) string {
			e, ok := a.responses[key].(*mcp.ElicitResult)
			if !ok || e == nil || e.Action != "accept" {
				return ""
			}
			v, _ := e.Content[key].(string)
			return v
		}
		schema := func(key string) json.RawMessage {
			return json.RawMessage(`{"type":"object","properties":{"` + key + `":{"type":"string"}},"required":["` + key + `"]}`)
		}
		switch {
		case a.state == "asked-name" && answer("name") != "":
			return mcp.InputRequestMap{"color": &mcp.ElicitParams{Message: "Your favourite color?", RequestedSchema: schema("color")}}, "name=" + answer("name"), ""
		case !strings.HasPrefix(a.state, "name=") || answer("color") == "":
			return mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: "Your name?", RequestedSchema: schema("name")}}, "asked-name", ""
		}
		return nil, "", strings.TrimPrefix(a.state, "name=") + " likes " + answer("color")
	}
	s.AddPrompt(&mcp.Prompt{Name: "rounds"}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		asks, state, text := round(ask{req.Params.InputResponses, req.Params.RequestState})
		if asks != nil {
			return &mcp.GetPromptResult{InputRequests: asks, RequestState: state}, nil
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	})
	s.AddResource(&mcp.Resource{Name: "rounds", URI: "fixture:///rounds"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		asks, state, text := round(ask{req.Params.InputResponses, req.Params.RequestState})
		if asks != nil {
			return &mcp.ReadResourceResult{InputRequests: asks, RequestState: state}, nil
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
	})
}

// TestBridgeReadsForOlderClient: a prompts/get and a resources/read of a
// 2025-11-25 client, on a server spoken to in 2026-07-28 only (the
// fixture, a real stdio process, protocol pinned) whose prompt and
// resource ask for input in two rounds, reach the client as elicitation
// requests during the request, one per round, and then give the server's
// answer, as tools/call does through the bridge. Each leg is a prompt.get
// or resource.read entry of its own, with the hash of its result as the
// server sent it, a later one naming the one before and the hash of its
// answers; the receipt is the last leg's.
func TestBridgeReadsForOlderClient(t *testing.T) {
	l := newTestLog(t)
	cfg := fixtureServerConfig(t, "fx")
	cfg.Env[fixtureEnv], cfg.Protocol = "rounds", statelessProtocol
	p := startProxy(t, l, []ServerConfig{cfg}, nil)
	if !p.downstreams()[0].stateless() {
		t.Fatal("the pinned server's session is not 2026-07-28")
	}
	var asked []string
	client := mcp.NewClient(&mcp.Implementation{Name: "older-client", Version: "1"}, &mcp.ClientOptions{
		// A client of 2025-11-25 knows no input_required result; go-sdk's
		// would answer one itself, which would hide a missing bridge.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			if strings.Contains(req.Params.Message, "color") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "green"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	ctx := context.Background()
	cs := connectInMemory(t, p, client)

	wantAsked := "[Your name? Your favourite color?]"
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "fx__rounds"})
	if err != nil {
		t.Fatalf("prompts/get in three legs: %v", err)
	}
	if len(gp.Messages) != 1 || textOfContent(gp.Messages[0].Content) != "Ada likes green" || fmt.Sprint(asked) != wantAsked {
		t.Errorf("prompts/get in three legs: %s, client asked %v, want %s", mustJSON(gp), asked, wantAsked)
	}
	pe := l.readReceipt(t, gp.Meta, log.KindPromptGet)
	asked = nil
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "fx+fixture:///rounds"})
	if err != nil {
		t.Fatalf("resources/read in three legs: %v", err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].Text != "Ada likes green" || rr.Contents[0].URI != "fx+fixture:///rounds" || fmt.Sprint(asked) != wantAsked {
		t.Errorf("resources/read in three legs: %s, client asked %v, want %s", mustJSON(rr), asked, wantAsked)
	}
	re := l.readReceipt(t, rr.Meta, log.KindResourceRead)

	checkReadLegs(t, l, log.KindPromptGet, pe, 3)
	checkReadLegs(t, l, log.KindResourceRead, re, 3)
}

// readLegsIn returns the read entries of kind in the log, in order, with
// their indexes.
func readLegsIn(t *testing.T, l *testLog, kind string) (legs []*log.ReadEntry, at []uint64) {
	t.Helper()
	for i := uint64(1); i < l.size(t); i++ {
		if e := mustParse(t, l.entry(t, i)); e.Kind == kind {
			r, err := log.ParseRead(e)
			if err != nil {
				t.Fatal(err)
			}
			legs, at = append(legs, r), append(at, i)
		}
	}
	return legs, at
}

// checkReadLegs checks that the log's entries of kind are the n legs of
// one read, the last the receipt's (last), with distinct results, each
// later one naming the one before and the hash of its answers.
func checkReadLegs(t *testing.T, l *testLog, kind string, last *log.ReadEntry, n int) {
	t.Helper()
	legs, at := readLegsIn(t, l, kind)
	if len(legs) != n || legs[n-1].ResultSHA256 != last.ResultSHA256 {
		t.Fatalf("%s entries: %s, want %d legs, the last the receipt's", kind, mustJSON(legs), n)
	}
	for i, r := range legs {
		if i == 0 {
			checkContinues(t, kind, i, r.Continues, r.InputResponsesSHA256, 0)
			continue
		}
		checkContinues(t, kind, i, r.Continues, r.InputResponsesSHA256, at[i-1])
		if r.ResultSHA256 == legs[i-1].ResultSHA256 {
			t.Errorf("%s legs %d and %d have one result", kind, i, i+1)
		}
		if i > 1 && r.InputResponsesSHA256 == legs[i-1].InputResponsesSHA256 {
			t.Errorf("%s legs %d and %d carry other answers but one hash", kind, i, i+1)
		}
	}
}

func textOfContent(c mcp.Content) string {
	if t, ok := c.(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}
