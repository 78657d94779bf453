package main

// A probe of provlog replay against a retained result that was kept
// scrubbed of an actor's redacted value (helpers in replay_probe_test.go).

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayProbeScrubbedResultUnchanged: with retain: full, a result that
// echoes an earlier redacted value of the actor is kept scrubbed, under
// result_retained_sha256, while result_sha256 stays the hash of the
// result as received (docs/formats.md, call.result). Replaying such a
// call against the same server gets a fresh result whose hash is exactly
// result_sha256; replay must call it unchanged.
//
// Observed: replay (proxy/replay/replay.go, runner.compare) diffs the
// fresh result against the scrubbed blob, finds /content/0/text apart
// ("[redacted]" against the value) and reports "changed", never looking
// at result_sha256, which matches.
//
// Fix: in compare, when the entry has result_retained_sha256 (the blob is
// not the result as received), decide by fresh.sum == res.ResultSHA256
// (and use the blob only to name paths); or scrub the fresh result with
// the same rule before diffing.
func TestReplayProbeScrubbedResultUnchanged(t *testing.T) {
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
