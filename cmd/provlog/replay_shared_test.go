package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayDataSharedLog: provlog replay --data with a config naming a
// shared PostgreSQL log (store:) replays that log's calls, reading their
// payloads where the sidecar keeps them, the log's blob table, as serve
// does (openBlobs): a call whose arguments (too large for an entry) went
// to a blob is re-run with them, and a retained result is compared with
// its blob. Before, replay opened the data dir's Pebble store and blobs
// only.
func TestReplayDataSharedLog(t *testing.T) {
	fx := newScrubFixture(t)
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	data, cfgPath := filepath.Join(dir, "data"), filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf("data: %s\nstore: %s\nservers:\n  - id: fx\n    url: %s\n    retain: full\n", data, dsn, fx.url))
	sc := mustOpenSidecar(t, cfg)
	cs, closeClient := memClient(t, sc, "recorder")
	first, _ := sc.seq.Checkpoint()
	big := strings.Repeat("large argument ", 5000) // over an entry's 64 KiB
	for _, q := range []string{big, "small"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": q}}); err != nil || res.IsError {
			t.Fatalf("fx__echo: %v %v", err, res)
		}
	}
	if blob, _ := sidecarEntry(t, sc, first).Fields["args_sha256"].(string); blob == "" {
		t.Fatalf("the large call's arguments went to no blob")
	}
	closeClient()
	sc.close()

	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--data", data, "--config", cfgPath, "--json",
		"--from", fmt.Sprint(first), "--to", fmt.Sprint(first + 4)}, &out, &errb); code != 0 {
		t.Fatalf("replay --data on a shared log exited %d: %s %s", code, out.String(), errb.String())
	}
	var rep replay.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(rep.Outcomes) != 2 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	for i, o := range rep.Outcomes {
		if o.Class != replay.Unchanged || o.HashOnly {
			t.Errorf("call %d (entry %d): %s, hash only %v (%s %s); want unchanged, compared with its kept result", i, o.Index, o.Class, o.HashOnly, o.Reason, o.Note)
		}
	}
}
