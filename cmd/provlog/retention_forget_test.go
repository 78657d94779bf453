package main

// Retention by age when the blob store is briefly not there.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRetentionForgetsOnlyPurgedBlobs: retention deletes, once they are
// older than max_age, the payloads no newer entry names, even when the
// blob store was not there for one run (its volume not yet mounted, an
// NFS outage: the directory is empty) and is back for the next. Only a
// purge entry makes the age index forget a blob; before, a run that did
// not see a blob dropped it from the index, and saved it, and the
// payload was kept past max_age for good.
func TestRetentionForgetsOnlyPurgedBlobs(t *testing.T) {
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
