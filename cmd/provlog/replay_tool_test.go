package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy/replay"
)

// TestRecordReplayRefuses calls the record_replay tool of a real sidecar
// with reports provlog replay would never send: each is refused with what
// is wrong, and nothing is written. A report as provlog replay writes it
// (a golden entry from before the record was typed) is written as given.
func TestRecordReplayRefuses(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), "data: "+filepath.Join(dir, "data")+"\nservers: []\n")
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := sc.proxy.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replayer", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	golden, err := os.ReadFile("../../proxy/replay/testdata/entry-definition-changed.json")
	if err != nil {
		t.Fatal(err)
	}
	ge, err := log.ParseEntry(golden)
	if err != nil {
		t.Fatal(err)
	}
	// fields returns a fresh copy of the golden entry's members, edited.
	fields := func(edit func(f map[string]any)) map[string]any {
		var f map[string]any
		b, _ := json.Marshal(ge.Fields)
		json.Unmarshal(b, &f)
		edit(f)
		return f
	}
	for _, c := range []struct {
		name  string
		edit  func(f map[string]any)
		words string // in the refusal
	}{
		{"unknown field", func(f map[string]any) { f["note"] = "trust me" }, `unexpected field "note"`},
		{"unknown field in range", func(f map[string]any) { f["range"].(map[string]any)["step"] = 2 }, `unknown field "step"`},
		{"unknown field in a definition change", func(f map[string]any) {
			f["definition_changes"].([]any)[0].(map[string]any)["why"] = "x"
		}, `unknown field "why"`},
		{"runs a string", func(f map[string]any) { f["runs"] = "3" }, "runs is a JSON string, where an integer belongs"},
		{"counts an array", func(f map[string]any) { f["counts"] = []any{1, 2} }, "counts is a JSON array, where an object belongs"},
		{"a count a fraction", func(f map[string]any) { f["counts"].(map[string]any)["changed"] = 0.5 }, "number 0.5, where an integer belongs"},
		{"outcomes a string", func(f map[string]any) { f["outcomes"] = "2,4" }, "outcomes is a JSON string"},
		{"missing counts", func(f map[string]any) { delete(f, "counts") }, `has no "counts"`},
		{"missing outcomes", func(f map[string]any) { delete(f, "outcomes") }, "exactly one of outcomes and outcomes_sha256"},
		{"a null", func(f map[string]any) { f["definition_changes"].([]any)[0].(map[string]any)["server"] = nil }, "definition_changes[0].server is null"},
		{"an unknown class", func(f map[string]any) { f["counts"].(map[string]any)["great"] = 0 }, "counts.great: unknown"},
		{"a negative count", func(f map[string]any) { f["counts"].(map[string]any)["changed"] = -1 }, "below zero"},
		{"range backwards", func(f map[string]any) { f["range"] = map[string]any{"from": 9, "to": 3} }, "range.from 9 is past range.to 3"},
		{"outcomes outside the range", func(f map[string]any) { f["outcomes"] = map[string]any{"unchanged": "2,40"} }, "outside the range"},
		{"outcomes that do not match the counts", func(f map[string]any) { f["outcomes"] = map[string]any{"unchanged": "2"} }, "names 1 calls, counts.unchanged is 2"},
		{"a hash not hex", func(f map[string]any) { f["ignore_sha256"] = strings.Repeat("X", 64) }, "ignore_sha256 is not a lowercase hex SHA-256"},
		{"changes not counted", func(f map[string]any) { f["definitions"].(map[string]any)["changed"] = 0 }, "definition_changes name 1 calls"},
	} {
		before, _ := sc.seq.Checkpoint()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: map[string]any{"fields": fields(c.edit)}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text := toolText(res)
		if !res.IsError || !strings.Contains(text, c.words) || !strings.Contains(text, "Nothing was written") {
			t.Errorf("%s: answer %q (error %v), want a refusal saying %q", c.name, text, res.IsError, c.words)
		}
		if after, _ := sc.seq.Checkpoint(); after != before {
			t.Errorf("%s: the refused report was written (size %d -> %d)", c.name, before, after)
		}
	}

	// The golden report is taken, and written as it was given, by the
	// sidecar's actor.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: map[string]any{"fields": fields(func(map[string]any) {})}})
	if err != nil || res.IsError {
		t.Fatalf("the golden report: %v %q", err, toolText(res))
	}
	size, _ := sc.seq.Checkpoint()
	es, err := sc.store.Entries(ctx, size-1, size)
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := replay.ParseRecord(e)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := replay.ParseRecord(ge)
	got.Time, got.Actor, want.Time, want.Actor = ge.Time, ge.Actor, ge.Time, ge.Actor
	if e.Actor != cfg.Actor || !reflect.DeepEqual(got, want) {
		t.Errorf("written by %q: %+v, want by %q: %+v", e.Actor, got, cfg.Actor, want)
	}
}

func toolText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var s string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			s += t.Text
		}
	}
	return s
}

// TestRecordReplayFits: provlog replay --log sizes its record under the
// operator's actor, and the sidecar writes it under the token's, here an
// actor id of 128 bytes. A record that just fits the first way is too
// large the second; the sidecar's record_replay fits it as replay does
// (outcomes pinned by their hash) and says so in its answer. Before, it
// refused the record, after all the replay work.
func TestRecordReplayFits(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	actor := strings.Repeat("replay-bot.", 12)[:opp.MaxActor]
	cfgPath := filepath.Join(dir, "provlog.yaml")
	writeFile(t, cfgPath, []byte(fmt.Sprintf("data: %s\nactor: %s\nservers: []\n", data, actor)))
	base, _ := startServe(t, "--config", cfgPath)
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}

	// record has n unchanged calls, at every other index, as provlog
	// replay makes it for the operator.
	record := func(n int) *replay.Record {
		rep := &replay.Report{To: 2 * uint64(n), Runs: 1, Counts: map[string]int{replay.Unchanged: n}, Definitions: map[string]int{replay.DefinitionSame: n}}
		for i := range n {
			rep.Outcomes = append(rep.Outcomes, replay.Outcome{Index: 2 * uint64(i), Class: replay.Unchanged, Definition: replay.DefinitionSame})
		}
		return rep.Record(operatorActor, time.Now(), nil)
	}
	// The most calls whose record fits the log under the operator's actor.
	n := sort.Search(20000, func(n int) bool { _, err := record(n).Marshal(); return err != nil }) - 1
	r := record(n)
	if got := r.Fit(); got != nil {
		t.Fatalf("%d calls: the record was fitted under the operator's actor (%v); the test needs one that fits", n, got)
	}
	outcomes, err := replay.SumJCS(r.Outcomes)
	if err != nil {
		t.Fatal(err)
	}
	long := *r
	long.Actor = actor
	if _, err := long.Marshal(); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Fatalf("%d calls under the sidecar's actor: %v; the test needs a record too large", n, err)
	}

	index, hashed, err := recordReplayRemote(context.Background(), base, strings.TrimSpace(string(tok)), r)
	if err != nil {
		t.Fatalf("recording %d calls through record_replay: %v", n, err)
	}
	if !reflect.DeepEqual(hashed, []string{"outcomes"}) {
		t.Errorf("record_replay's answer names %v as replaced by their hash, want [outcomes]", hashed)
	}
	es, err := newRemote(base, strings.TrimSpace(string(tok))).Entries(context.Background(), index, index+1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := replay.ParseRecord(e)
	if err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	if got.Actor != actor || got.Outcomes != nil || got.OutcomesSHA256 != outcomes || got.Counts[replay.Unchanged] != n {
		t.Errorf("entry %d: %+v, want by %s, %d unchanged calls pinned by outcomes_sha256 %s", index, got, actor, n, outcomes)
	}
}
