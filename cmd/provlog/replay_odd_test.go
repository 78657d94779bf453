package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/replay"
)

// oddReplayFixture is a go-sdk server over streamable HTTP whose tools
// answer with results that are not I-JSON: a lone surrogate in _meta,
// which encoding/json passes on from a json.RawMessage. "same" answers
// alike every time; "moving" carries the data version in its text;
// "surrogate" carries it in which lone surrogate it sends, a difference
// JSON decoding reads as U+FFFD either way; "flicker" alternates its lone
// surrogate from call to call.
func oddReplayFixture(t *testing.T) (url string, version *atomic.Int64) {
	version = &atomic.Int64{}
	version.Store(1)
	var calls atomic.Int64
	lone := func(i int64) json.RawMessage { return json.RawMessage(fmt.Sprintf(`"\ud%03x"`, 0x800+i%2*0x400)) }
	answers := map[string]func() *mcp.CallToolResult{
		"same": func() *mcp.CallToolResult { return oddResult(lone(0), "same") },
		"moving": func() *mcp.CallToolResult {
			return oddResult(lone(0), fmt.Sprintf("data version %d", version.Load()))
		},
		"surrogate": func() *mcp.CallToolResult { return oddResult(lone(version.Load()), "same") },
		"flicker":   func() *mcp.CallToolResult { return oddResult(lone(calls.Add(1)), "same") },
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "odd-replay", Version: "1"}, nil)
	for name, answer := range answers {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return answer(), nil })
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, version
}

func oddResult(lone json.RawMessage, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{"odd": lone}, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// TestReplayNotIJSON records calls whose results are not I-JSON through a
// real sidecar (their call.result entries hash the bytes as received,
// result_canonical: false), changes the server's data, and replays: each
// call is classified by the proxy's rule for such results, against its
// hash and against its retained bytes, and nothing fails. Before, replay
// refused every such fresh result ("not I-JSON") and each call failed.
func TestReplayNotIJSON(t *testing.T) {
	url, version := oddReplayFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf(`data: %s
servers:
  - id: fx
    url: %s
  - id: full
    url: %s
    retain: full
`, data, url, url))

	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	calls := []struct {
		tool, want string
		hashOnly   bool
		paths      string
		unseen     bool // differs only where decoding cannot show it
	}{
		{"fx__same", replay.Unchanged, true, "", false},
		{"fx__moving", replay.Changed, true, "", false},
		{"fx__surrogate", replay.Changed, true, "", false},
		{"full__same", replay.Unchanged, false, "", false},
		{"full__moving", replay.Changed, false, "/content/0/text", false},
		{"full__surrogate", replay.Changed, false, "", true},
		{"fx__flicker", replay.Flaky, false, "", true},
	}
	first, _ := sc.seq.Checkpoint()
	for _, c := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, err, res)
		}
	}
	closeClient()
	sc.close()
	// The premise: the log holds these results by the hash of their
	// bytes as received.
	for i, c := range calls {
		res, err := log.ParseCallResult(entryAt(t, data, first+2*uint64(i)+1))
		if err != nil || !res.ResultRaw {
			t.Fatalf("%s: call.result %+v (%v), want result_canonical: false", c.tool, res, err)
		}
	}

	version.Store(2)
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s %s", code, out.String(), errb.String())
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rep.Outcomes) != len(calls) {
		t.Fatalf("%d outcomes, want %d: %s", len(rep.Outcomes), len(calls), out.String())
	}
	for i, o := range rep.Outcomes {
		c := calls[i]
		unseen := strings.Contains(o.Reason+o.Note, "JSON decoding cannot show")
		if o.Class != c.want || o.HashOnly != c.hashOnly || strings.Join(o.Paths, " ") != c.paths || unseen != c.unseen {
			t.Errorf("%s: %+v\nwant %s, hash only %v, paths %q, said to differ where decoding cannot show it %v", c.tool, o, c.want, c.hashOnly, c.paths, c.unseen)
		}
	}
	if msg, code := runCmd(t, "audit", "--data", data); code != 0 {
		t.Fatalf("audit after replay: %s", msg)
	}
}
