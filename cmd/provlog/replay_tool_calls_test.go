package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
)

// TestRecordReplayNamesCalls: a report given to a real sidecar's
// record_replay tool names, in its outcomes and definition changes, the
// calls it replayed: each index must be a call entry of the log, and the
// counts may add up to no more calls than its range holds. A report
// naming the genesis entry, a call's result or a task entry as a call is
// refused and nothing is written; one naming the calls is taken. Before,
// every such report was written.
func TestRecordReplayNamesCalls(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), "data: "+filepath.Join(dir, "data")+"\nservers: []\n")
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	ctx := context.Background()
	cs, closeClient := memClient(t, sc, "replayer")
	defer closeClient()
	// 0 genesis, 1 call, 2 its result, 3 call, 4 its result.
	for i := range 2 {
		rc, err := sc.seq.Append(ctx, callEntry("fx", "stable", map[string]any{"q": i}))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := (&log.Entry{Kind: log.KindCallResult, Actor: "local", Fields: map[string]any{
			"call": rc.Index, "result_sha256": strings.Repeat("a", 64), "result_bytes": 2, "is_error": false, "duration_ns": 1}}).Marshal()
		if _, err := sc.seq.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	report := func(outcomes string, n int) map[string]any {
		return map[string]any{"fields": map[string]any{
			"range": map[string]any{"from": 0, "to": 5}, "runs": 1,
			"counts":   map[string]any{"changed": 0, "failed": 0, "flaky": 0, "not_replayable": 0, "unchanged": n},
			"outcomes": map[string]any{"unchanged": outcomes},
		}}
	}
	for _, c := range []struct {
		outcomes string
		n        int
	}{{"0", 1}, {"2", 1}, {"1-2", 2}, {"0-1,3-4", 4}} {
		before, _ := sc.seq.Checkpoint()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: report(c.outcomes, c.n)})
		if err != nil {
			t.Fatal(err)
		}
		if text := toolText(res); !res.IsError || !strings.Contains(text, "not a call") || !strings.Contains(text, "Nothing was written") {
			t.Errorf("outcomes %q: answer %q (error %v), want a refusal saying an index is not a call", c.outcomes, text, res.IsError)
		}
		if after, _ := sc.seq.Checkpoint(); after != before {
			t.Errorf("outcomes %q: the report was written (size %d -> %d)", c.outcomes, before, after)
		}
	}
	// Outcomes pinned by their hash: the counts alone are held to the
	// range's calls.
	hashed := report("", 3)
	f := hashed["fields"].(map[string]any)
	delete(f, "outcomes")
	f["outcomes_sha256"] = strings.Repeat("b", 64)
	before, _ := sc.seq.Checkpoint()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: hashed})
	if err != nil {
		t.Fatal(err)
	}
	if text := toolText(res); !res.IsError || !strings.Contains(text, "2 calls") || !strings.Contains(text, "Nothing was written") {
		t.Errorf("3 calls counted in a range of 2: answer %q (error %v), want a refusal", text, res.IsError)
	}
	if after, _ := sc.seq.Checkpoint(); after != before {
		t.Errorf("3 calls counted in a range of 2: the report was written (size %d -> %d)", before, after)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: report("1,3", 2)})
	if err != nil || res.IsError {
		t.Fatalf("a report naming the two calls: %v %q", err, toolText(res))
	}
}
