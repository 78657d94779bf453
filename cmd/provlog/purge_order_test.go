package main

// The payload audit after a purge: a purge entry covers only the blobs of
// entries written before it.

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
	cs, closeClient := memClient(t, sc, "purge-test")
	defer closeClient()
	for _, c := range calls {
		res, err := cs.CallTool(ctx, c)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.Name, err, res)
		}
	}
	size, _ := sc.seq.Checkpoint()
	return size - 1
}

// TestPurgeAuditOrder: a retained result (retain: full) is purged by an
// erasure; later the same server gives the same result to a new call, and
// the proxy keeps it again under the same name (the content's hash). The
// new entry's payload is present, and no purge entry after it removes it:
// audit counts it present, and verify-bundle does not list it as purged.
// Once the blob file is lost behind the log's back, the audit fails on
// it. Before, a purge entry covered every entry naming the blob, even
// those written after it, and the lost payload passed as purged.
func TestPurgeAuditOrder(t *testing.T) {
	_, data, cfg := retainingEcho(t)
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
	b := filepath.Join(t.TempDir(), "bundle")
	if out, code := runCmd(t, "export", "--data", data, "--out", b); code != 0 {
		t.Fatal(out)
	}
	if out, code := runCmd(t, "verify-bundle", b); code != 0 || !strings.Contains(out, "1 of them were purged") ||
		strings.Contains(out, fmt.Sprintf("purged: entry %d ", second)) {
		t.Errorf("verify-bundle lists the second entry's payload as purged: %d\n%s", code, out)
	}

	// The second entry's payload is lost without any purge.
	if err := os.Remove(filepath.Join(data, blobDir, blob[:2], blob)); err != nil {
		t.Fatal(err)
	}
	out, code := runCmd(t, "audit", "--data", data)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("missing (no purge entry after it covers it): entry %d", second)) {
		t.Errorf("audit after entry %d's payload was lost without a purge (the only purge entry is older than it): exit %d\n%s", second, code, out)
	}
}
