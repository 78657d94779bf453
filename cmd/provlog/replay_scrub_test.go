package main

// Replay of calls whose recorded arguments or retained results were
// scrubbed of an actor's redacted values.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/replay"
)

// scrubSecret is the value the tests' actor sends under a redacted field.
const scrubSecret = "s3cret-val-42"

// scrubFixture is a read-only MCP server: "login" takes a token (the
// redacted field), "echo" answers with its q and notes every q it gets,
// "whoami" answers with a text that holds the secret.
type scrubFixture struct {
	url string
	mu  sync.Mutex
	got []string // the q of every echo call, in order
}

func newScrubFixture(t *testing.T) *scrubFixture {
	fx := &scrubFixture{}
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv := mcp.NewServer(&mcp.Implementation{Name: "scrub-fixture", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "login", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("logged in"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		fx.mu.Lock()
		fx.got = append(fx.got, in.Q)
		fx.mu.Unlock()
		return text("echo: " + in.Q), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("you are bob, key " + scrubSecret), nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	fx.url = ts.URL
	return fx
}

// recordScrubCalls records, through an in-process sidecar (real Pebble,
// the real proxy) in front of fx, a login that sends the secret under the
// redacted field and then the calls given; it returns the data dir, the
// config's path and the log index of the first of the given calls.
func recordScrubCalls(t *testing.T, fx *scrubFixture, retain string, calls ...*mcp.CallToolParams) (data, cfgPath string, first uint64) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "data")
	cfgPath = filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf(`data: %s
servers:
  - id: fx
    url: %s
    redact: [token]
    retain: %s
`, data, fx.url, retain))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	login := &mcp.CallToolParams{Name: "fx__login", Arguments: map[string]any{"q": "bob", "token": scrubSecret}}
	for i, c := range append([]*mcp.CallToolParams{login}, calls...) {
		if i == 1 {
			first, _ = sc.seq.Checkpoint()
		}
		res, err := cs.CallTool(ctx, c)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.Name, err, res)
		}
	}
	closeClient()
	sc.close()
	return data, cfgPath, first
}

// replayJSON runs provlog replay --data on [from, to) and returns its report.
func replayJSON(t *testing.T, data, cfgPath string, from, to uint64) replay.Report {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--data", data, "--config", cfgPath, "--json",
		"--from", fmt.Sprint(from), "--to", fmt.Sprint(to)}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s %s", code, out.String(), errb.String())
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rep
}

// TestReplayScrubbedArgsAreNotSent: a call whose arguments quote an
// earlier redacted value of the same actor under a member the redact list
// does not name is recorded with that value cut out ({"q": "about
// [redacted]"}, proxy recordedArgs → scrubJSON). Replay must not send
// those arguments: they are not what the original call sent, and a
// result of theirs compared with the record would call an unchanged
// server changed. Member names cut out (scrubMembers) are checked in
// proxy/replay's TestStdioAndNotReplayable.
func TestReplayScrubbedArgsAreNotSent(t *testing.T) {
	fx := newScrubFixture(t)
	data, cfgPath, first := recordScrubCalls(t, fx, "hash",
		&mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "about " + scrubSecret}})
	if e := entryAt(t, data, first); !strings.Contains(fmt.Sprint(e.Fields["args"]), "[redacted]") {
		t.Fatalf("the echo call's recorded arguments were not scrubbed: %v", e.Fields["args"])
	}
	fx.mu.Lock()
	fx.got = nil
	fx.mu.Unlock()

	rep := replayJSON(t, data, cfgPath, first, first+2)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	o := rep.Outcomes[0]
	fx.mu.Lock()
	sent := append([]string(nil), fx.got...)
	fx.mu.Unlock()
	if o.Class != replay.NotReplayable || len(sent) > 0 {
		t.Errorf("replay of a call whose recorded arguments were scrubbed: class %s (%s); the server was sent q = %q; want not_replayable and nothing sent",
			o.Class, o.Reason, sent)
	}
}

// TestReplayScrubbedResultUnchanged: with retain: full, a result that
// echoes an earlier redacted value of the actor is kept scrubbed, under
// result_retained_sha256, while result_sha256 stays the hash of the
// result as received (docs/formats.md, call.result). Replaying such a
// call against the same server gets a fresh result whose hash is exactly
// result_sha256; replay must call it unchanged, not diff it against the
// scrubbed copy, where "[redacted]" stands for the value the fresh result
// holds.
func TestReplayScrubbedResultUnchanged(t *testing.T) {
	fx := newScrubFixture(t)
	data, cfgPath, first := recordScrubCalls(t, fx, "full",
		&mcp.CallToolParams{Name: "fx__whoami", Arguments: map[string]any{}})
	if e := entryAt(t, data, first+1); e.Fields["result_retained_sha256"] == nil {
		t.Fatalf("the whoami result was not kept scrubbed: %v", e.Fields)
	}
	rep := replayJSON(t, data, cfgPath, first, first+2)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if o := rep.Outcomes[0]; o.Class != replay.Unchanged {
		t.Errorf("replay of an unchanged result that was kept scrubbed: %s (%s, paths %v), want unchanged", o.Class, o.Reason, o.Paths)
	}
}
