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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/proxy/replay"
)

// oldBigResult is the JCS form of bigNumberFixture's result for id
// 12345678901234567891, as provlog hashed and kept it before results
// holding numbers JCS writes as others were hashed as received; oldBigSum
// is its SHA-256, the result_sha256 of such an old call.result (golden:
// fixed here, not computed by the code under test).
const (
	oldBigResult = `{"content":[{"text":"the id","type":"text"}],"structuredContent":{"id":12345678901234567000}}`
	oldBigSum    = "5deaa1d373c1b88953b54d1dcc12efa4f59b7d8de45bfa0ee30a5db2a5b68207"
)

// bigNumberFixture is a go-sdk server over streamable HTTP whose read-only
// tool "echo" answers with structured content {"id": <id>}, the number
// written out in full.
func bigNumberFixture(t *testing.T) (url string, id *atomic.Value) {
	id = &atomic.Value{}
	id.Store("12345678901234567891")
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: json.RawMessage(`{"id":` + id.Load().(string) + `}`),
				Content: []mcp.Content{&mcp.TextContent{Text: "the id"}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, id
}

// TestReplayExactNumbers records, through a real sidecar, calls whose
// results hold 12345678901234567891 (hashed as received, result_canonical:
// false), and adds call.result entries as provlog wrote them before (the
// hash of the JCS form, where the number is 12345678901234567000; one
// retained in that form). Replayed against the same server, every call is
// unchanged: the new entries by their wire bytes, the old ones in the
// form their marker (none) says, with a note that numbers were compared
// as doubles. Once the server answers 12345678901234567890, the new
// entries tell the change, at its path when retained; the old ones cannot
// (as doubles the numbers are one), and say why.
func TestReplayExactNumbers(t *testing.T) {
	url, id := bigNumberFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf("data: %s\nservers:\n  - id: fx\n    url: %s\n  - id: full\n    url: %s\n    retain: full\n", data, url, url))
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	first, _ := sc.seq.Checkpoint()
	for _, tool := range []string{"fx__echo", "full__echo"} {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	closeClient()
	sc.close()
	for i := range 2 {
		if res, err := log.ParseCallResult(entryAt(t, data, first+2*uint64(i)+1)); err != nil || !res.ResultRaw {
			t.Fatalf("call.result %d: %+v (%v), want result_canonical: false", i, res, err)
		}
	}
	// The old calls name the definition the new ones do: replay re-runs
	// a read-only tool only when its entry says which it was made against.
	toolSum, _ := entryAt(t, data, first).Fields["tool_sha256"].(string)
	appendOldBigResults(t, data, toolSum)

	replayed := func() []replay.Outcome {
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"replay", "--data", data, "--config", cfgPath, "--json"}, &out, &errb); code != 0 {
			t.Fatalf("replay exited %d: %s %s", code, out.String(), errb.String())
		}
		var rep replay.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return rep.Outcomes
	}
	type want struct {
		class, paths string
		doubles      bool // said to be compared as doubles
	}
	check := func(stage string, got []replay.Outcome, wants []want) {
		t.Helper()
		if len(got) != len(wants) {
			t.Fatalf("%s: %d outcomes %+v, want %d", stage, len(got), got, len(wants))
		}
		names := []string{"new", "new retained", "old", "old retained"}
		for i, o := range got {
			w := wants[i]
			doubles := strings.Contains(o.Note, "compared as doubles")
			if o.Class != w.class || strings.Join(o.Paths, " ") != w.paths || doubles != w.doubles {
				t.Errorf("%s: %s entry: %+v\nwant %s, paths %q, compared as doubles %v", stage, names[i], o, w.class, w.paths, w.doubles)
			}
		}
	}
	check("same server", replayed(), []want{{replay.Unchanged, "", false}, {replay.Unchanged, "", false}, {replay.Unchanged, "", true}, {replay.Unchanged, "", true}})
	id.Store("12345678901234567890")
	check("changed id", replayed(), []want{{replay.Changed, "", false}, {replay.Changed, "/structuredContent/id", false}, {replay.Unchanged, "", true}, {replay.Unchanged, "", true}})
	if msg, code := runCmd(t, "audit", "--data", data); code != 0 {
		t.Fatalf("audit: %s", msg)
	}
}

// appendOldBigResults appends to data's log two calls of echo (on fx, and
// on full with the result retained) whose call.result entries are as
// provlog wrote them before: oldBigSum, no result_canonical. The calls
// name the tool's definition toolSum.
func appendOldBigResults(t *testing.T, data, toolSum string) {
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(data, false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	seq, err := server.OpenSequencer(context.Background(), store, k.signer, k.verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	bs, err := blobs.Open(filepath.Join(data, blobDir))
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := bs.Put([]byte(oldBigResult)); err != nil || sum != oldBigSum {
		t.Fatalf("keeping the old result: %s, %v; want %s", sum, err, oldBigSum)
	}
	now := time.Now().UTC().Format(log.TimeFormat)
	for _, c := range []struct{ server, retained string }{{"fx", ""}, {"full", `"result_retained":true,`}} {
		call := appendEntry(t, seq, &log.Entry{Kind: log.KindCall, Time: time.Now(), Actor: "recorder", Fields: map[string]any{
			"server": c.server, "tool": "echo", "tool_sha256": toolSum, "args": map[string]any{}, "started": now}})
		old := fmt.Sprintf(`{"actor":"recorder","call":%d,"duration_ns":1,"is_error":false,"kind":"call.result","result_bytes":93,%s"result_sha256":"%s","time":"%s","v":1}`,
			call, c.retained, oldBigSum, now)
		if _, err := seq.Append(context.Background(), []byte(old)); err != nil {
			t.Fatalf("appending %s: %v", old, err)
		}
	}
}
