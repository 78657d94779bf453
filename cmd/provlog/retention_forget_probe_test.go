package main

// A probe of retention by age when the blob store is briefly not there.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetentionProbeForgetsUnseenBlobs: retention must delete, once they
// are older than max_age, the payloads that no newer entry names. Here the
// blob store is not there for one run of retention (its volume not yet
// mounted at start, an NFS outage: the directory is empty), and is back
// for the next.
//
// Observed: the first run finds nothing to purge, as it should, but
// ageIndex.pick (cmd/provlog/retention.go) drops from the index every
// blob bs.Has does not see ("purged already (an erasure)"), and the index
// is saved (retention.idx, purge --data and the sidecar's saveAges). Once
// the blobs are back, retention never looks at them again: "purged 0
// blobs" for payloads of 2020, kept forever past max_age with no word of
// it. The same happens for any Has error (Has returns false on an I/O
// error as well as on absence).
//
// Fix: do not drop a blob from the index because the store lacks it;
// drop it only when a purge entry names it (the purge path already calls
// forget), or keep it and let a later run see it; and let Has report
// errors apart from absence.
func TestRetentionProbeForgetsUnseenBlobs(t *testing.T) {
	p := makePayloadLog(t)
	d := p.data
	store := filepath.Join(d, blobDir)
	away := filepath.Join(t.TempDir(), "blobs-volume")
	if err := os.Rename(store, away); err != nil {
		t.Fatal(err)
	}
	out, code := runCmd(t, "purge", "--data", d, "--older-than", "24h", "--reason", "retention: 1d")
	if code != 0 || !strings.Contains(out, "purged 0 blobs") {
		t.Fatalf("retention with the blob store away: %d %s", code, out)
	}
	// The volume is back.
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, store); err != nil {
		t.Fatal(err)
	}
	if !blobExists(d, p.aliceArgs) || !blobExists(d, p.aliceRes) {
		t.Fatal("the old blobs are not back")
	}
	out, code = runCmd(t, "purge", "--data", d, "--older-than", "24h", "--reason", "retention: 1d")
	if code != 0 || blobExists(d, p.aliceArgs) || blobExists(d, p.aliceRes) {
		t.Errorf("retention once the blob store is back: exit %d, %q; alice's payloads of 2020 still there: %v %v",
			code, strings.TrimSpace(out), blobExists(d, p.aliceArgs), blobExists(d, p.aliceRes))
	}
}
