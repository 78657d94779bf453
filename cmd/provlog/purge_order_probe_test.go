package main

// A probe of the payload audit after a purge: does a purge entry cover a
// blob that an entry written after it names?

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callsThroughSidecar opens an in-process sidecar (real Pebble, the real
// proxy) on cfg, makes the calls, closes it, and returns the index of the
// call.result entry of the last call.
func callsThroughSidecar(t *testing.T, cfg *Config, calls ...*mcp.CallToolParams) uint64 {
	t.Helper()
	ctx := context.Background()
	sc := mustOpenSidecar(t, cfg)
	defer sc.close()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := sc.proxy.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range calls {
		res, err := cs.CallTool(ctx, c)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.Name, err, res)
		}
	}
	size, _ := sc.seq.Checkpoint()
	return size - 1
}

// TestPurgeProbeAuditOrder: a retained result (retain: full) is purged by
// an erasure; later the same server gives the same result to a new call,
// and the proxy keeps it again, as a new blob file under the same name (the
// name is the content's hash). That new entry's payload is present; no
// purge entry after it removes it. If the blob file is then lost (deleted
// behind the log's back, a disk restored from an older backup), the audit
// must fail: "missing (no purge entry names it)".
//
// Observed: already while the new blob is there, audit --data says "OK:
// payloads: 2 named by entries, 0 present and intact, 2 purged"; once it
// is lost, it says the same, exit 0, counting the new entry's lost
// payload as purged by a purge entry written before that entry existed. payloadRefs.check
// (cmd/provlog/purge_sidecar.go) looks up purged[blob] without comparing
// the purge entry's index with the naming entry's; verify-bundle's
// purged_payloads (bundlePayloads) have the same fault and list the new
// entry as "purged" by the older purge entry. The same hole is opened by
// a purge racing a call in flight (blobSet.put finds the blob, retention
// deletes it, then the call.result naming it is committed): the entry
// says result_retained: true of a blob that was gone before it was written,
// and the audit calls it purged.
//
// Fix: in payloadRefs.add/check, a blob counts as purged for an entry only
// when a purge entry with a larger index names it (keep, per blob, the
// indices of the purge entries naming it).
func TestPurgeProbeAuditOrder(t *testing.T) {
	fx := newScrubFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := loadConfigText(t, filepath.Join(dir, "provlog.yaml"), fmt.Sprintf(`data: %s
servers:
  - id: fx
    url: %s
    retain: full
`, data, fx.url))
	echo := &mcp.CallToolParams{Name: "fx__echo", Arguments: map[string]any{"q": "the same"}}

	first := callsThroughSidecar(t, cfg, echo)
	blob, _ := entryAt(t, data, first).Fields["result_sha256"].(string)
	if blob == "" || !blobExists(data, blob) {
		t.Fatalf("entry %d kept no blob: %v", first, entryAt(t, data, first).Fields)
	}
	if out, code := runCmd(t, "purge", "--data", data, "--blob", blob, "--reason", "erasure request #7"); code != 0 {
		t.Fatalf("purge: %d %s", code, out)
	}
	if blobExists(data, blob) {
		t.Fatal("purge left the blob")
	}

	second := callsThroughSidecar(t, cfg, echo)
	if got, _ := entryAt(t, data, second).Fields["result_sha256"].(string); got != blob || !blobExists(data, blob) {
		t.Fatalf("the second call's result: %s, kept %v; want %s kept again", got, blobExists(data, blob), blob)
	}
	if out, code := runCmd(t, "audit", "--data", data); code != 0 || !strings.Contains(out, "1 present and intact, 1 purged") {
		t.Errorf("audit with the second entry's result kept again (present, no purge after it): exit %d, want it counted present\n%s", code, out)
	}

	// The second entry's payload is lost without any purge.
	if err := os.Remove(filepath.Join(data, blobDir, blob[:2], blob)); err != nil {
		t.Fatal(err)
	}
	out, code := runCmd(t, "audit", "--data", data)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("missing (no purge entry names it): entry %d", second)) {
		t.Errorf("audit after entry %d's payload was lost without a purge (the only purge entry is older than it): exit %d\n%s", second, code, out)
	}
}
