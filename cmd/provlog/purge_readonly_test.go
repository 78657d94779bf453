package main

// An erasure whose blobs cannot be deleted (the blob store on a
// read-only mount), what audit says afterwards, and its retry.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
)

// TestPurgeReadOnlyErasure: an erasure of alice's payloads (purge --actor
// alice) on a data dir whose blob store is mounted read-only. The purge
// entry is committed first, as it must be; the deletions then fail, and
// purge says so and exits 1 ("run the purge again"). Until they succeed,
// alice's payloads are still on disk, and audit fails naming them: the
// purge did not finish. Run again, with the mount writable, the purge
// deletes them without another purge entry, and audit counts them
// purged. Before, audit said "2 purged" with both still there, and each
// retry (background retention's too, every interval) wrote one more
// purge entry naming the same blobs.
func TestPurgeReadOnlyErasure(t *testing.T) {
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
	if code != 1 || strings.Contains(out, "2 purged") || !strings.Contains(out, "not purged (the purge did not finish; run it again): entry 1: blob "+p.aliceArgs+": purge entry 6 names it, but it is still there") {
		t.Errorf("audit with alice's erased payloads still on disk (the erasure's deletions failed): exit %d:\n%s", code, out)
	}
	// Retention meets them too, and writes no purge entry of its own.
	out, code = runCmd(t, "purge", "--data", d, "--older-than", "24h", "--reason", "retention: 1d")
	if code != 1 || !strings.Contains(out, "the purge is recorded, but deleting blob") {
		t.Errorf("retention on the read-only blob store: %d %s", code, out)
	}

	needMount(t, "-o", "remount,rw,bind", store)
	out, code = runCmd(t, "purge", "--data", d, "--actor", "alice", "--reason", "erasure request #1")
	if code != 0 || !strings.Contains(out, "purged 2 blobs; purge entries []") || blobExists(d, p.aliceArgs) || blobExists(d, p.aliceRes) {
		t.Fatalf("the erasure run again: %d %s", code, out)
	}
	if out, code := runCmd(t, "audit", "--data", d); code != 0 || !strings.Contains(out, "3 present and intact, 2 purged") {
		t.Errorf("audit once the erasure finished: %d %s", code, out)
	}
	s, err := openStore(d, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ := s.State(context.Background())
	es, _ := s.Entries(context.Background(), 0, st.Size)
	purges := 0
	for _, b := range es {
		if e, _ := log.ParseEntry(b); e != nil && e.Kind == blobs.KindPurge {
			purges++
		}
	}
	if purges != 1 {
		t.Errorf("%d purge entries, want 1: the retries wrote more", purges)
	}
}
