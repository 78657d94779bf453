package main

// A probe of what replay says of an arguments blob that was changed on
// disk (helpers in replay_probe_test.go and purge_order_probe_test.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/provlog/provlog/proxy/replay"
)

// TestReplayProbeTamperedArgsBlobCalledPurged: a call's arguments too
// large for an entry are kept as a blob (args_sha256). That blob's bytes
// are then changed on disk (no purge: no purge entry names it). Replay
// cannot replay the call; it must say why truthfully: the blob does not
// hash to its name (tampered or corrupt), as provlog audit says.
//
// Observed: replay reports the call not replayable because "arguments
// were moved to blob …, which was purged": a purge that never happened,
// hiding the tampering from the operator, and the run's replay entry
// counts it as not_replayable like any purged payload. runner.args
// (proxy/replay/replay.go) turns every error of Blobs.Get into "which was
// purged". The same fallback in runner.compare reads a retained result
// whose blob is corrupt as "recorded result not retained: compared hashes
// only".
//
// Fix: tell errors.Is(err, blobs.ErrNotFound) (purged, or gone) from the
// others, and name the corrupt blob ("blob … does not hash to its name:
// changed on disk"); in compare, say the retained result could not be
// read and why.
func TestReplayProbeTamperedArgsBlobCalledPurged(t *testing.T) {
	fx := newScrubFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "provlog.yaml")
	cfg := loadConfigText(t, cfgPath, fmt.Sprintf(`data: %s
servers:
  - id: fx
    url: %s
`, data, fx.url))
	big := strings.Repeat("large argument ", 5000) // over an entry's 64 KiB
	last := callsThroughSidecar(t, cfg, &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": big}})
	call := last - 1
	blob, _ := entryAt(t, data, call).Fields["args_sha256"].(string)
	if blob == "" || !blobExists(data, blob) {
		t.Fatalf("the call's arguments were not moved to a blob: %v", entryAt(t, data, call).Fields)
	}
	path := filepath.Join(data, blobDir, blob[:2], blob)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	rep := replayJSON(t, data, cfgPath, call, last+1)
	if len(rep.Outcomes) != 1 {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
	o := rep.Outcomes[0]
	if o.Class != replay.NotReplayable {
		t.Fatalf("class %s (%s)", o.Class, o.Reason)
	}
	if strings.Contains(o.Reason, "purged") || !strings.Contains(o.Reason, "corrupt") && !strings.Contains(o.Reason, "hash") {
		t.Errorf("replay's reason for a changed arguments blob that no purge entry names: %q; want it named changed/corrupt, not purged", o.Reason)
	}
}
