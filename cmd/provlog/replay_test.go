package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/replay"
)

// replayFixture is a downstream MCP server whose results the test
// controls, served over streamable HTTP from the test binary, plus an
// HTTP endpoint serving its data release.
type replayFixture struct {
	url, releaseURL string
	dataVersion     atomic.Int64 // what "dataset" returns
	release         atomic.Value // string: what the release endpoint says
	writes          atomic.Int64 // how often "write" ran
	srv             *mcp.Server  // its tools can be redefined
}

type fxIn struct {
	Q     string `json:"q,omitempty"`
	Token string `json:"token,omitempty"`
}

type clockOut struct {
	Data string `json:"data"`
	At   int64  `json:"at"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newReplayFixture(t *testing.T) *replayFixture {
	fx := &replayFixture{}
	fx.dataVersion.Store(1)
	fx.release.Store("2026-01")
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv := mcp.NewServer(&mcp.Implementation{Name: "replay-fixture", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "stable", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("stable answer for " + in.Q), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "dataset", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("rows of %s in data version %d", in.Q, fx.dataVersion.Load())), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "random", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("sampled %d", rand.Int64())), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "secret", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		return text("hello " + in.Q), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "write"}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, any, error) {
		fx.writes.Add(1)
		return text("written " + in.Q), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "clock", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, in fxIn) (*mcp.CallToolResult, clockOut, error) {
		return nil, clockOut{Data: "fixed " + in.Q, At: time.Now().UnixNano()}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"release":%q}`, fx.release.Load().(string))
	}))
	t.Cleanup(rs.Close)
	fx.url, fx.releaseURL, fx.srv = ts.URL, rs.URL, srv
	return fx
}

// TestReplay records calls through a real sidecar in front of the
// fixture, changes the fixture's data, replays, and checks every class,
// the replay entry in the log, and that audit still passes.
func TestReplay(t *testing.T) {
	fx := newReplayFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	// fx: results kept as hashes, release from an HTTP endpoint that moves.
	// full: results retained, a static release that never moves, and an
	// ignore list for clock's volatile fields.
	cfgText := fmt.Sprintf(`data: %s
servers:
  - id: fx
    url: %s
    redact: [token]
    source: {type: http-json, url: %s, path: release, ttl: 1ms}
  - id: full
    url: %s
    retain: full
    source: {type: static, value: "v1"}
    replay_ignore:
      clock: [/structuredContent/at, /content]
`, data, fx.url, fx.releaseURL, fx.url)
	cfg := loadConfigText(t, cfgPath, cfgText)

	// Record.
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	calls := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"fx__stable", map[string]any{"q": "tp53"}, replay.Unchanged},
		{"fx__dataset", map[string]any{"q": "tp53"}, replay.Changed},
		{"full__dataset", map[string]any{"q": "brca1"}, replay.Changed},
		{"fx__random", map[string]any{"q": "x"}, replay.Flaky},
		{"fx__secret", map[string]any{"q": "x", "token": "s3cret"}, replay.NotReplayable},
		{"fx__write", map[string]any{"q": "x"}, replay.NotReplayable},
		{"full__clock", map[string]any{"q": "c"}, replay.Unchanged},
		{"full__stable", map[string]any{"q": "egfr"}, replay.Unchanged},
	}
	// Both servers' tools entries are in the log once the sidecar is open
	// (proxy.New; TestToolDefinitions), so the calls' indices follow them.
	first, _ := sc.seq.Checkpoint()
	for _, c := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, err, res)
		}
	}
	closeClient()
	sc.close()

	// The world moves on: new data under a new release.
	fx.dataVersion.Store(2)
	fx.release.Store("2026-02")
	writes := fx.writes.Load()

	var out bytes.Buffer
	var errb bytes.Buffer
	if code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s %s", code, out.String(), errb.String())
	}
	var rep struct {
		replay.Report
		Recorded *uint64 `json:"recorded_index"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rep.Outcomes) != len(calls) {
		t.Fatalf("%d outcomes, want %d: %s", len(rep.Outcomes), len(calls), out.String())
	}
	for i, o := range rep.Outcomes {
		c := calls[i]
		if o.Index != first+2*uint64(i) { // a call entry and a call.result per call
			t.Errorf("%s: index %d, want %d", c.tool, o.Index, first+2*uint64(i))
		}
		if o.Class != c.want {
			t.Errorf("%s: %s (%s), want %s", c.tool, o.Class, o.Reason, c.want)
		}
		// Replay hashes the definitions the server lists as the proxy
		// hashed them when the calls were made.
		if o.Definition != replay.DefinitionSame || o.ToolThen == "" || o.ToolNow != o.ToolThen {
			t.Errorf("%s: definition %q (then %s, now %s), want the same", c.tool, o.Definition, o.ToolThen, o.ToolNow)
		}
	}
	byTool := func(i int) replay.Outcome { return rep.Outcomes[i] }
	if o := byTool(1); o.ReleaseThen != "2026-01" || o.ReleaseNow != "2026-02" || o.SameRelease || !o.HashOnly {
		t.Errorf("fx dataset: %+v, want release 2026-01 → 2026-02, hash only", o)
	}
	if o := byTool(2); !o.SameRelease || o.ReleaseNow != "v1" || strings.Join(o.Paths, " ") != "/content/0/text" || o.HashOnly {
		t.Errorf("full dataset: %+v, want same release flagged and the path /content/0/text", o)
	}
	if o := byTool(3); strings.Join(o.Paths, " ") != "/content/0/text" {
		t.Errorf("random: paths %v, want /content/0/text", o.Paths)
	}
	if o := byTool(4); !strings.Contains(o.Reason, "redacted") {
		t.Errorf("secret: reason %q", o.Reason)
	}
	if o := byTool(5); !strings.Contains(o.Reason, "not marked safe") {
		t.Errorf("write: reason %q", o.Reason)
	}
	if o := byTool(6); o.HashOnly {
		t.Errorf("clock: compared hashes only, want the retained result with the ignore list: %+v", o)
	}
	if fx.writes.Load() != writes {
		t.Errorf("replay ran the unsafe tool")
	}
	if rep.Runs != 3 || rep.Counts[replay.Unchanged] != 3 || rep.Counts[replay.Changed] != 2 || rep.Counts[replay.Flaky] != 1 || rep.Counts[replay.NotReplayable] != 2 {
		t.Errorf("counts %v runs %d", rep.Counts, rep.Runs)
	}

	// The run is in the log.
	if rep.Recorded == nil {
		t.Fatal("no replay entry recorded")
	}
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries(ctx, *rep.Recorded, *rep.Recorded+1)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil || e.Kind != replay.KindReplay || e.Actor != operatorActor {
		t.Fatalf("entry %d: %v %+v, want a replay entry by %s", *rep.Recorded, err, e, operatorActor)
	}
	rec, err := replay.ParseRecord(e)
	if err != nil {
		t.Fatalf("entry %d: %v", *rep.Recorded, err)
	}
	if oc := rec.Outcomes; oc[replay.Flaky] != fmt.Sprint(first+6) || oc[replay.Changed] != fmt.Sprintf("%d,%d", first+2, first+4) {
		t.Errorf("replay entry outcomes %v", oc)
	}
	if rec.IgnoreSHA256 == "" {
		t.Errorf("replay entry does not pin the ignore lists: %+v", rec)
	}

	// What --single-run loses: the flaky tool is reported as changed.
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--json", "--single-run",
		"--from", fmt.Sprint(first + 6), "--to", fmt.Sprint(first + 7)}, &out, &errb); code != 0 {
		t.Fatalf("replay --single-run exited %d: %s", code, errb.String())
	}
	rep.Outcomes = nil
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 1 || rep.Outcomes[0].Class != replay.Changed || rep.Runs != 1 {
		t.Errorf("--single-run on the flaky tool: %s, want it misreported as changed", out.String())
	}

	// Human output.
	out.Reset()
	if code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--from", fmt.Sprint(first), "--to", fmt.Sprint(first + 6)}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"release 2026-01 → 2026-02", "same release: suspicious", "recorded as replay entry"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("human output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("human output:\n%s", out.String())

	if msg, code := runCmd(t, "audit", "--data", data); code != 0 {
		t.Fatalf("audit after replay: %s", msg)
	}
	// The replay entry exports and verifies like any other entry.
	bundleDir := filepath.Join(dir, "bundle")
	if msg, code := runCmd(t, "export", "--data", data, "--out", bundleDir); code != 0 {
		t.Fatalf("export after replay: %s", msg)
	}
	if msg, code := runCmd(t, "verify-bundle", bundleDir); code != 0 {
		t.Fatalf("verify-bundle after replay: %s", msg)
	}
}

// TestReplayRemote reads the log over HTTP from a running sidecar (whose
// data dir is locked) and records nothing.
func TestReplayRemote(t *testing.T) {
	fx := newReplayFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfgText := fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n", data, fx.url)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _ := startServe(t, "--config", cfgPath)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	cs := connectHTTP(t, base, token)
	for _, tool := range []string{"fx__stable", "fx__dataset", "fx__write"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"q": "a"}}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	fx.dataVersion.Store(7)
	r := newRemote(base, token)
	var before uint64
	r.Checkpoints(context.Background(), 0, func(n uint64, _ []byte) error { before = n; return nil })

	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--log", base, "--token", token, "--config", cfgPath}, &out, &errb); code != 0 {
		t.Fatalf("replay --log exited %d: %s %s", code, out.String(), errb.String())
	}
	for _, want := range []string{"fx/stable", "unchanged", "fx/dataset", "changed", "fx/write", "not_replayable", "recorded as replay entry"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The run is in the sidecar's log, as one replay entry by the token's actor.
	var after uint64
	r.Checkpoints(context.Background(), 0, func(n uint64, _ []byte) error { after = n; return nil })
	if after != before+1 {
		t.Fatalf("replay --log appended %d entries, want 1 (size %d -> %d)", after-before, before, after)
	}
	es, err := r.Entries(context.Background(), before, after)
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := replay.ParseRecord(e); err != nil || rec.Actor != "local" || rec.Counts[replay.Unchanged] != 1 {
		t.Fatalf("recorded entry: %v %+v", err, rec)
	}
	// The tool refuses a report without its counts, and writes nothing.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: recordReplayTool, Arguments: map[string]any{"fields": map[string]any{"range": 1}}})
	if err != nil || !res.IsError {
		t.Fatalf("record_replay without counts: %v %v", err, res)
	}
	var last uint64
	r.Checkpoints(context.Background(), 0, func(n uint64, _ []byte) error { last = n; return nil })
	if last != after {
		t.Fatalf("a refused record_replay wrote to the log")
	}
}

// TestReplayChangedBlob changes on disk, with no purge, the blob a call's
// arguments were moved to (too large for an entry) and the one another
// call's result is retained in. Replay must say what happened to them,
// as provlog audit does: a blob that no longer hashes to its name is
// changed or corrupt, not purged, which is routine and would hide the
// tampering from the operator; and a retained result it cannot read is
// not one that was never retained.
func TestReplayChangedBlob(t *testing.T) {
	fx := newScrubFixture(t)
	big := strings.Repeat("large argument ", 5000) // over an entry's 64 KiB
	data, cfgPath, first := recordScrubCalls(t, fx, "full",
		&mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": big}},
		&mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "small"}})
	argsBlob, _ := entryAt(t, data, first).Fields["args_sha256"].(string)
	resultBlob, _ := entryAt(t, data, first+3).Fields["result_sha256"].(string)
	for _, sum := range []string{argsBlob, resultBlob} {
		if sum == "" || !blobExists(data, sum) {
			t.Fatalf("no blob: arguments %q, result %q", argsBlob, resultBlob)
		}
		path := filepath.Join(data, blobDir, sum[:2], sum)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x01
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	rep := replayJSON(t, data, cfgPath, first, first+4)
	if len(rep.Outcomes) != 2 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if o := rep.Outcomes[0]; o.Class != replay.NotReplayable || strings.Contains(o.Reason, "purged") || !strings.Contains(o.Reason, "corrupt") {
		t.Errorf("a call whose arguments blob changed on disk: %s (%s); want not_replayable, named corrupt, not purged", o.Class, o.Reason)
	}
	if o := rep.Outcomes[1]; o.Class != replay.Unchanged || !o.HashOnly || strings.Contains(o.Note, "not retained") || !strings.Contains(o.Note, "corrupt") {
		t.Errorf("a call whose retained result changed on disk: %s, note %q; want unchanged by hash, the blob named corrupt", o.Class, o.Note)
	}
}

// TestReplayNewerRevisionCall: a 2026-07-28 client calls a stdio server
// (this test binary as the sidefx server, a go-sdk server) through the
// sidecar; the proxy serves that client from a second session in the
// newest revision (proxy/revision.go, sessionFor) and records the result
// as that session received it, with the "resultType" and _meta a go-sdk
// server adds on such a session only. Replaying the call against the
// same, unchanged server must say unchanged: replay dials the session the
// call went to, by the call entry's protocol_version
// (proxy.ServerConfig.Revision), not always 2025-11-25.
func TestReplayNewerRevisionCall(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf(`data: %s
servers:
  - id: fx
    command: [%q]
    env: {%s: %q}
    retain: full
    replay: true
`, data, os.Args[0], sidefxEnv, filepath.Join(dir, "effects")))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := sc.proxy.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "newer-client", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__append", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	size, _ := sc.seq.Checkpoint()
	cs.Close()
	ss.Close()
	sc.close()
	if e := entryAt(t, data, size-2); e.Fields["protocol_version"] != "2026-07-28" {
		t.Fatalf("call entry: %v", e.Fields)
	}

	rep := replayJSON(t, data, cfgPath, size-2, size)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	if o := rep.Outcomes[0]; o.Class != replay.Unchanged {
		t.Errorf("replay of a 2026-07-28 client's call to an unchanged server: %s (%s), paths %v; want unchanged", o.Class, o.Reason, o.Paths)
	}
}
