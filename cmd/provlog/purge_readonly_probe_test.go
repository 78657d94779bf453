package main

// A probe of an erasure whose blobs cannot be deleted (the blob store on
// a read-only mount), and of what audit says afterwards.

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPurgeProbeReadOnlyErasureAuditedAsPurged: an erasure of alice's
// payloads (purge --actor alice) on a data dir whose blob store is
// mounted read-only. The purge entry is committed first, as it must be;
// the deletions then fail, and purge says so and exits 1 ("run the purge
// again"). Until they succeed, alice's payloads are still on disk: audit
// must not report them as purged.
//
// Observed: audit --data exits 0 with "OK: payloads: 5 named by entries,
// 3 present and intact, 2 purged": alice's two blobs, both still present
// and readable, are counted purged because a purge entry names them
// (payloadRefs.check, cmd/provlog/purge_sidecar.go, looks no further once
// a blob is named by a purge entry). An erasure that never happened
// passes the audit. (Each retry writes one more purge entry naming the
// same blobs, entry 6 then 7 when run twice: background retention does
// this every interval while the mount stays read-only.)
//
// Fix: in check, for a blob named by a purge entry, look in the store
// too, and report one still present as "purge entry N names it, but it
// is still present: the purge did not finish" (a problem, or at least a
// count apart from purged); and have purge retry the deletion of blobs a
// purge entry already names without writing another entry.
func TestPurgeProbeReadOnlyErasureAuditedAsPurged(t *testing.T) {
	p := makePayloadLog(t)
	d := p.data
	store := filepath.Join(d, blobDir)
	needMount(t, "--bind", store, store)
	t.Cleanup(func() { umount(t, store) })
	needMount(t, "-o", "remount,ro,bind", store)

	out, code := runCmd(t, "purge", "--data", d, "--actor", "alice", "--reason", "erasure request #1")
	if code == 0 || !strings.Contains(out, "read-only file system") || !strings.Contains(out, "run the purge again") {
		t.Fatalf("purge on a read-only blob store: %d %s", code, out)
	}
	if !blobExists(d, p.aliceArgs) || !blobExists(d, p.aliceRes) {
		t.Fatal("alice's blobs were deleted from a read-only mount")
	}
	out, code = runCmd(t, "audit", "--data", d)
	if code == 0 && strings.Contains(out, "2 purged") {
		t.Errorf("audit with alice's erased payloads still on disk (the erasure's deletions failed): exit %d, counted as purged:\n%s", code, out)
	}
}
