package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/replay"
)

// replayEntryCounter counts the entries read through it.
type replayEntryCounter struct {
	entryReader
	read atomic.Int64
}

func (c *replayEntryCounter) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	es, err := c.entryReader.Entries(ctx, start, end)
	c.read.Add(int64(len(es)))
	return es, err
}

// TestRecordReplayReadsWhatItNames: record_replay holds a report's calls
// to the log by reading the entries the report names, not every entry of
// the range it claims: on a real sidecar's log of 50,000 entries a report
// of range [0, size) naming one call reads a handful of entries, and one
// naming a non-call is still refused. Before, every report read the whole
// range (50,001 entries per call of the tool), so any actor could make
// the sidecar read its whole log per call.
func TestRecordReplayReadsWhatItNames(t *testing.T) {
	dir := t.TempDir()
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), "data: "+filepath.Join(dir, "data")+"\nservers: []\n")
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	ctx := context.Background()
	// 0 genesis, 25,000 calls (1 to 25,000), then 25,000 results.
	const pairs = 25000
	res, _ := (&log.Entry{Kind: log.KindCallResult, Actor: "local", Fields: map[string]any{
		"call": uint64(1), "result_sha256": strings.Repeat("a", 64), "result_bytes": 2, "is_error": false, "duration_ns": 1}}).Marshal()
	for _, entry := range []func(int) []byte{
		func(i int) []byte { return callEntry("fx", "stable", map[string]any{"q": i}) },
		func(int) []byte { return res },
	} {
		var wg sync.WaitGroup
		work := make(chan int)
		for range 64 {
			wg.Go(func() {
				for i := range work {
					if _, err := sc.seq.Append(ctx, entry(i)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for i := range pairs {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	size, _ := sc.seq.Checkpoint()
	if size != 2*pairs+1 {
		t.Fatalf("size %d", size)
	}
	rec := func(outcomes string) *replay.Record {
		return &replay.Record{From: 0, To: size, Runs: 1, Counts: map[string]int{replay.Unchanged: 1},
			Outcomes: map[string]string{replay.Unchanged: outcomes}}
	}
	cr := &replayEntryCounter{entryReader: sc.store}
	if err := checkReplayCalls(ctx, cr, rec("7")); err != nil {
		t.Fatalf("a report naming call 7: %v", err)
	}
	if n := cr.read.Load(); n > 16 {
		t.Errorf("a report naming one call of [0, %d) read %d entries, want those it names", size, n)
	}
	cr.read.Store(0)
	if err := checkReplayCalls(ctx, cr, rec("30000")); err == nil || !strings.Contains(err.Error(), "not a call") {
		t.Errorf("a report naming result 30000 as a call: %v, want a refusal", err)
	}
	if n := cr.read.Load(); n > 16 {
		t.Errorf("a report naming one entry of [0, %d) read %d entries, want those it names", size, n)
	}
	// Outcomes pinned by their hash name no call: the range is read
	// until it holds as many calls as the counts, and no further.
	cr.read.Store(0)
	hashed := &replay.Record{From: 0, To: size, Runs: 1, Counts: map[string]int{replay.Unchanged: 3},
		OutcomesSHA256: strings.Repeat("b", 64)}
	if err := checkReplayCalls(ctx, cr, hashed); err != nil {
		t.Fatalf("a report of 3 calls pinned by their hash: %v", err)
	}
	if n := cr.read.Load(); n > 16 {
		t.Errorf("a report of 3 calls of [0, %d) pinned by their hash read %d entries, want those up to the third call", size, n)
	}
	// Through the tool, on the same log.
	cs, closeClient := memClient(t, sc, "replayer")
	defer closeClient()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: recordReplayTool, Arguments: map[string]any{"fields": map[string]any{
		"range": map[string]any{"from": 0, "to": size}, "runs": 1,
		"counts":   map[string]any{"changed": 0, "failed": 0, "flaky": 0, "not_replayable": 0, "unchanged": 1},
		"outcomes": map[string]any{"unchanged": "7"},
	}}})
	if err != nil || r.IsError {
		t.Fatalf("record_replay naming call 7: %v %q", err, toolText(r))
	}
}
