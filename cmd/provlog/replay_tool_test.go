package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	cs, closeClient := memClient(t, sc, "replayer")
	defer closeClient()

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
		{"a range past the log", func(f map[string]any) { f["range"] = map[string]any{"from": 0, "to": 1000} }, "range.to 1000 is past the log's size"},
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
	// sidecar's actor, once the log holds the entries its range names.
	for size, _ := sc.seq.Checkpoint(); size < 6; size, _ = sc.seq.Checkpoint() {
		if _, err := sc.seq.Append(ctx, callEntry("fx", "stable", map[string]any{"q": size})); err != nil {
			t.Fatal(err)
		}
	}
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

// TestRecordReplayFits: a record sized under the operator's actor (as
// provlog replay --log sized it before it left the fitting to the sidecar)
// is written under the token's, here an actor id of 128 bytes. A record
// that just fits the first way is too large the second; the sidecar's
// record_replay fits it as replay does (outcomes pinned by their hash)
// and says so in its answer. Before, it refused the record, after all the
// replay work.
func TestRecordReplayFits(t *testing.T) {
	actor := strings.Repeat("replay-bot.", 12)[:opp.MaxActor]
	// The most calls whose record fits the log under the operator's actor.
	n := maxUnchanged(operatorActor)
	r := unchangedRecord(n)
	if got := r.Fit(); got != nil {
		t.Fatalf("%d calls: the record was fitted under the operator's actor (%v); the test needs one that fits", n, got)
	}
	// A log holding the entries the record's range names.
	data := makeDataDir(t, int(r.To))
	cfgPath := filepath.Join(t.TempDir(), "provlog.yaml")
	writeFile(t, cfgPath, []byte(fmt.Sprintf("data: %s\nactor: %s\nservers: []\n", data, actor)))
	base, _ := startServe(t, "--config", cfgPath)
	tok := readLocalToken(t, data)
	outcomes, err := replay.SumJCS(r.Outcomes)
	if err != nil {
		t.Fatal(err)
	}
	long := *r
	long.Actor = actor
	if _, err := long.Marshal(); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Fatalf("%d calls under the sidecar's actor: %v; the test needs a record too large", n, err)
	}

	index, hashed, err := recordReplayRemote(context.Background(), base, tok, r)
	if err != nil {
		t.Fatalf("recording %d calls through record_replay: %v", n, err)
	}
	if !reflect.DeepEqual(hashed, []string{"outcomes"}) {
		t.Errorf("record_replay's answer names %v as replaced by their hash, want [outcomes]", hashed)
	}
	got := remoteRecord(t, base, tok, index)
	if got.Actor != actor || got.Outcomes != nil || got.OutcomesSHA256 != outcomes || got.Counts[replay.Unchanged] != n {
		t.Errorf("entry %d: %+v, want by %s, %d unchanged calls pinned by outcomes_sha256 %s", index, got, actor, n, outcomes)
	}
}

// TestReplayLogLeavesFitToSidecar records runs as provlog replay --log
// does (openReplayRemote's record) in a sidecar of the default actor,
// "local", shorter than provlog.operator.
//
// A record too large for the log under provlog.operator and not under
// "local" is written with its outcomes: the sidecar, which writes it
// under the token's actor, had no need to pin them. The CLI fitted the
// record under provlog.operator before sending it, and the entry held
// outcomes_sha256 alone, a pin of what the report listed in full.
//
// A record whose record_replay arguments are over the limit the sidecar
// takes (maxReplayArgs) is still fitted by the CLI, to that limit: sent
// as it is, the sidecar refuses it, after all the replay work.
func TestReplayLogLeavesFitToSidecar(t *testing.T) {
	dir := t.TempDir()
	// A log as long as the largest record's range below (record_replay
	// refuses a range past the log's size).
	data := makeDataDir(t, int(unchangedRecord(3*maxUnchanged("local")).To))
	cfgPath := writeFile(t, filepath.Join(dir, "provlog.yaml"), []byte("data: "+data+"\nservers: []\n"))
	base, _ := startServe(t, "--config", cfgPath)
	tok := readLocalToken(t, data)
	const actor = "local" // the config's default
	ctx := context.Background()
	src, err := openReplayRemote(ctx, base, tok, 0, 0, &replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	under := func(r *replay.Record, actor string) error {
		c := *r
		c.Actor = actor
		_, err := c.Marshal()
		return err
	}

	// The most calls whose record fits the log under "local".
	n := maxUnchanged(actor)
	r := unchangedRecord(n)
	if err := under(r, operatorActor); !errors.Is(err, log.ErrEntryTooLarge) {
		t.Fatalf("%d calls under %s: %v; the test needs a record too large under it", n, operatorActor, err)
	}
	want := maps.Clone(r.Outcomes)
	index, hashed, err := src.record(ctx, r)
	if err != nil {
		t.Fatalf("recording %d calls: %v", n, err)
	}
	got := remoteRecord(t, base, tok, index)
	if hashed != nil || got.Actor != actor || got.OutcomesSHA256 != "" || !reflect.DeepEqual(got.Outcomes, want) {
		t.Errorf("%d calls that fit the log under %q: entry %d by %q has outcomes_sha256 %q and %d outcome classes, hashed %v; want every outcome written, none hashed",
			n, actor, index, got.Actor, got.OutcomesSHA256, len(got.Outcomes), hashed)
	}

	// A record whose arguments are over maxReplayArgs.
	n = 3 * n
	r = unchangedRecord(n)
	if args, err := replayArgs(r); err != nil || len(args) <= maxReplayArgs {
		t.Fatalf("%d calls: arguments of %d bytes (%v); the test needs more than %d", n, len(args), err, maxReplayArgs)
	}
	outcomes, err := replay.SumJCS(r.Outcomes)
	if err != nil {
		t.Fatal(err)
	}
	index, hashed, err = src.record(ctx, r)
	if err != nil {
		t.Fatalf("recording %d calls, arguments over the limit: %v", n, err)
	}
	got = remoteRecord(t, base, tok, index)
	if !reflect.DeepEqual(hashed, []string{"outcomes"}) || got.Actor != actor || got.Outcomes != nil || got.OutcomesSHA256 != outcomes {
		t.Errorf("%d calls: entry %d by %q with outcomes_sha256 %q, hashed %v; want outcomes pinned by %s", n, index, got.Actor, got.OutcomesSHA256, hashed, outcomes)
	}
}

// maxUnchanged is the most calls whose unchangedRecord fits the log
// under actor.
func maxUnchanged(actor string) int {
	return sort.Search(20000, func(n int) bool {
		r := unchangedRecord(n)
		r.Actor = actor
		_, err := r.Marshal()
		return err != nil
	}) - 1
}

// unchangedRecord is the record provlog replay makes for the operator of
// n unchanged calls, at every other index from 1 (calls, in a log of
// makeDataDir's: record_replay takes only indices of calls): n-1 commas
// and ranges of one index each.
func unchangedRecord(n int) *replay.Record {
	rep := &replay.Report{To: 2 * uint64(n), Runs: 1, Counts: map[string]int{replay.Unchanged: n}, Definitions: map[string]int{replay.DefinitionSame: n}}
	for i := range n {
		rep.Outcomes = append(rep.Outcomes, replay.Outcome{Index: 2*uint64(i) + 1, Class: replay.Unchanged, Definition: replay.DefinitionSame})
	}
	return rep.Record(operatorActor, time.Now(), nil)
}

// readLocalToken returns the token of the data dir's local actor.
func readLocalToken(t *testing.T, data string) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(tok))
}

// remoteRecord reads entry index of the sidecar at base as a replay
// record.
func remoteRecord(t *testing.T, base, token string, index uint64) *replay.Record {
	t.Helper()
	es, err := newRemote(base, token).Entries(context.Background(), index, index+1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		t.Fatal(err)
	}
	r, err := replay.ParseRecord(e)
	if err != nil {
		t.Fatalf("entry %d: %v", index, err)
	}
	return r
}
