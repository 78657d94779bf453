package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/proxy"
)

const stdioFixtureEnv = "PROVLOG_REPLAY_STDIO_FIXTURE"

// TestMain re-executes the test binary as a stdio MCP server when asked.

var _ BlobReader = (*blobs.Store)(nil)

func TestMain(m *testing.M) {
	proxy.ReaperMain()
	if os.Getenv(stdioFixtureEnv) != "" {
		srv := mcp.NewServer(&mcp.Implementation{Name: "stdio-fixture", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "echo", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				Q string `json:"q"`
			}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.Q}}}, nil, nil
			})
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func callEntry(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	b, err := (&log.Entry{Kind: log.KindCall, Time: time.Unix(1, 0), Actor: "a", Fields: fields}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sumOf is the hash of res as the go-sdk fixture server sends it.
func sumOf(t *testing.T, res *mcp.CallToolResult) string {
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	c, err := log.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(c)
	return hex.EncodeToString(s[:])
}

// TestStdioAndNotReplayable replays against a stdio server started as the
// proxy starts one, and checks the reasons a call is not replayable.
func TestStdioAndNotReplayable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bs, err := blobs.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	want := sumOf(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo hi"}}})
	stale := sumOf(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo old"}}})
	argsBlob, err := bs.Put([]byte(`{"q":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	fixture := proxy.ServerConfig{ID: "st", Command: []string{exe}, Env: map[string]string{stdioFixtureEnv: "1"}}
	echoSum := listedSum(t, fixture, "echo")
	// The calls name the definition the fixture lists, as the proxy
	// records them (without one, a readOnlyHint is no reason to re-run).
	callEntry := func(t *testing.T, fields map[string]any) []byte {
		fields["tool_sha256"] = echoSum
		return callEntry(t, fields)
	}
	entries := [][]byte{
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"q": "hi"}, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"q": "hi"}, "result_sha256": stale}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args_sha256": argsBlob, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args_sha256": sha256hex("gone"), "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"nested": []any{map[string]any{"k": "[redacted]"}}}, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{}, "is_error": true, "error": "boom"}),
		callEntry(t, map[string]any{"server": "other", "tool": "echo", "args": map[string]any{}, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "gone", "args": map[string]any{}, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"q": "hi"}, "continues": 3, "input_responses_sha256": sha256hex("answers"), "result_sha256": want}),
		// A redacted value quoted in another field (scrubText), and one
		// in a member name (scrubMembers).
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"q": "about [redacted]"}, "result_sha256": want}),
		callEntry(t, map[string]any{"server": "st", "tool": "echo", "args": map[string]any{"q": "hi", "[redacted]": "x"}, "result_sha256": want}),
	}
	rep, err := Run(context.Background(), entries, 10, Options{
		Servers: []proxy.ServerConfig{{ID: "st", Command: []string{exe}, Env: map[string]string{stdioFixtureEnv: "1"}}},
		Blobs:   bs,
		Runs:    2,
	})
	if err != nil {
		t.Fatal(err)
	}
	wantClass := []string{Unchanged, Changed, Unchanged, NotReplayable, NotReplayable, NotReplayable, NotReplayable, NotReplayable, NotReplayable, NotReplayable, NotReplayable}
	for i, o := range rep.Outcomes {
		if o.Index != 10+uint64(i) || o.Class != wantClass[i] {
			t.Errorf("entry %d: %+v, want %s", i, o, wantClass[i])
		}
	}
	if r := rep.Outcomes[3].Reason; !strings.Contains(r, "purged") {
		t.Errorf("purged args blob: reason %q", r)
	}
	if r := rep.Outcomes[8].Reason; !strings.Contains(r, "later leg") {
		t.Errorf("a later leg of a call that asked for input: reason %q", r)
	}
	for _, o := range rep.Outcomes[9:] {
		if !strings.Contains(o.Reason, `hold "[redacted]"`) {
			t.Errorf("entry %d, arguments scrubbed of a redacted value: reason %q", o.Index, o.Reason)
		}
	}
	// A tool the server no longer lists is not replayable, on a server
	// marked replay: true too: calling it got "unknown tool", reported
	// as a changed result.
	rep, err = Run(context.Background(), entries[7:8], 17, Options{
		Servers: []proxy.ServerConfig{{ID: "st", Command: []string{exe}, Env: map[string]string{stdioFixtureEnv: "1"}, Replay: true}},
		Runs:    1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Outcomes[0]; o.Class != NotReplayable || !strings.Contains(o.Reason, `tool "gone" is no longer listed`) || o.Definition != DefinitionGone || o.ToolNow != "" {
		t.Errorf("a tool no longer listed, replay: true: %+v", o)
	}
	// Without the recorded result, an ignore list cannot be applied to
	// it: only hashes are compared, and the outcome says so.
	rep, err = Run(context.Background(), entries[1:2], 11, Options{
		Servers: []proxy.ServerConfig{{ID: "st", Command: []string{exe}, Env: map[string]string{stdioFixtureEnv: "1"},
			ReplayIgnore: map[string][]string{"echo": {"/content"}}}},
		Runs: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Outcomes[0]; o.Class != Changed || !o.HashOnly || !strings.Contains(o.Note, "ignore list not applied") {
		t.Errorf("hash-only with an ignore list: %+v", o)
	}

	// Calls as provlog records them now: a call entry, and its outcome
	// in a later call.result entry; a call cut off has none.
	call := func(q string) []byte {
		b, err := (&log.CallEntry{Time: time.Unix(1, 0), Actor: "a", Server: "st", Tool: "echo", ToolSHA256: echoSum, Args: log.CanonicalJSON(`{"q":"` + q + `"}`)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	result := func(i uint64, sum string) []byte {
		b, err := (&log.CallResultEntry{Time: time.Unix(2, 0), Actor: "a", Call: i, ResultSHA256: sum, ResultBytes: 1}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	two := [][]byte{call("hi"), call("hi"), result(21, stale), call("hi"), result(20, want)}
	rep, err = Run(context.Background(), two, 20, Options{
		Servers: []proxy.ServerConfig{{ID: "st", Command: []string{exe}, Env: map[string]string{stdioFixtureEnv: "1"}}},
		Runs:    2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range rep.Outcomes {
		got = append(got, fmt.Sprintf("%d %s", o.Index, o.Class))
	}
	if w := []string{"20 unchanged", "21 changed", "23 not_replayable"}; !reflect.DeepEqual(got, w) {
		t.Errorf("two-entry calls: %v, want %v", got, w)
	}
}

// listedSum is the definition hash of the tool the server cfg lists
// under name now, as the proxy makes it.
func listedSum(t *testing.T, cfg proxy.ServerConfig, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := proxy.Dial(ctx, cfg, "", "replay-test", "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tools {
		if x.Name == name {
			return x.SHA256
		}
	}
	t.Fatalf("the server lists no tool %q", name)
	return ""
}

func sha256hex(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestDiffIgnoreRanges(t *testing.T) {
	a, _ := decode([]byte(`{"a":1,"b":{"c":[1,2,3],"d~/e":"x"},"t":5}`))
	b, _ := decode([]byte(`{"a":1,"b":{"c":[1,9,3],"d~/e":"y"},"t":6,"n":null}`))
	got := diff("", a, b, true)
	want := []string{"/b/c/1", "/b/d~0~1e", "/t", ""} // "/n" only b holds: named by its object, the root
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %v, want %v", got, want)
	}
	a = applyIgnore(a, []string{"/t", "/b/d~0~1e", "/b/c/1", "/missing/x"})
	b = applyIgnore(b, []string{"/t", "/b/d~0~1e", "/b/c/1", "/n"})
	if d := diff("", a, b, true); len(d) != 0 {
		t.Errorf("after ignoring: %v", d)
	}
	if d := diff("", 1, 2, true); !reflect.DeepEqual(d, []string{""}) {
		t.Errorf("root diff %v", d)
	}
	if got := Ranges([]uint64{9, 1, 2, 3, 7}); got != "1-3,7,9" {
		t.Errorf("Ranges = %q", got)
	}
}

// TestScrubbedRecord: a result retained scrubbed of a redacted value (its
// blob named by result_retained_sha256) is judged by result_sha256, the
// hash of the result as received; the scrubbed copy only names where a
// changed result differs.
func TestScrubbedRecord(t *testing.T) {
	bs, err := blobs.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	then := `{"content":[{"type":"text","text":"key s3cret"}],"isError":false}`
	scrubbed, err := log.Canonicalize([]byte(`{"content":[{"type":"text","text":"key [redacted]"}],"isError":false}`))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := bs.Put(scrubbed)
	if err != nil {
		t.Fatal(err)
	}
	now := answer(then)
	url := wireServer(t, map[string]*atomic.Value{"tools/list": answer(`{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`), "tools/call": now})
	entries := [][]byte{callEntry(t, map[string]any{"server": "w", "tool": "echo", "args": map[string]any{},
		"result_sha256": jcsSum(t, then), "result_retained": true, "result_retained_sha256": kept})}
	opts := Options{Servers: []proxy.ServerConfig{{ID: "w", URL: url, Replay: true}}, Blobs: bs, Runs: 1}
	rep, err := Run(context.Background(), entries, 5, opts)
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Outcomes[0]; o.Class != Unchanged || len(o.Paths) > 0 || !strings.Contains(o.Note, "compared by hash") {
		t.Errorf("the same result, retained scrubbed: %+v", o)
	}
	now.Store(`{"content":[{"type":"text","text":"key other"}],"isError":true}`)
	if rep, err = Run(context.Background(), entries, 5, opts); err != nil {
		t.Fatal(err)
	}
	if o := rep.Outcomes[0]; o.Class != Changed || !reflect.DeepEqual(o.Paths, []string{"/content/0/text", "/isError"}) {
		t.Errorf("another result, the record retained scrubbed: %+v", o)
	}
}
