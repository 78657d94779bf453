package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// oldWitnessVKey is the verifier key of the witness that cosigned
// testdata/data-5e84559's checkpoint (provlog-witness of e56b913, whose
// data dir is cmd/provlog-witness/testdata/witness-e56b913).
const oldWitnessVKey = "witness.example/old+1a5e4056+BDF2KcFggxUcJWHcqJoBFkSZ6Ipf0ckdRFV+ztwiCJn1"

// copyOldDataDir copies testdata/data-5e84559 to a temp dir, keys 0600
// as keygen left them (git keeps no such mode).
func copyOldDataDir(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(data, os.DirFS(filepath.Join("testdata", "data-5e84559"))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{logKeyFile, anchorKeyFile, localToken, retentionIndexFile, authNamespacesFile, tasksIndexFile} {
		if err := os.Chmod(filepath.Join(data, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// TestDataDirOf5e84559: the data dir that build 5e84559 of main wrote
// (testdata/data-5e84559: `provlog serve` with a server whose results
// are kept, retention of 2s every 1s, a witness (provlog-witness of
// e56b913) cosigning, an auth: issuer with actor_prefix "idp:"; four
// calls, retention purging the first three's results, then stopped)
// stays readable: the witnesses' cosigned checkpoint is checked against
// the log on start and verifies with the witness's key, the retention
// index is taken as saved (not rebuilt from the log), and the OAuth
// issuer's namespace stays reserved after a config without it.
func TestDataDirOf5e84559(t *testing.T) {
	ctx := context.Background()
	data := copyOldDataDir(t)
	sc := mustOpenSidecar(t, &Config{Data: data, Actor: "local"})
	defer sc.close()
	size, _ := sc.seq.Checkpoint()

	// Witness state: the cosigned checkpoint, checked against the log.
	n, err := checkHandedOut(ctx, data, sc.store, sc.keys.verifier)
	if err != nil || n != 1 {
		t.Errorf("checking what left the process: %d checked (%v), want the cosigned checkpoint", n, err)
	}
	b, err := os.ReadFile(filepath.Join(data, cosignedFile))
	if err != nil {
		t.Fatal(err)
	}
	wv, err := log.NewCosignatureVerifier(oldWitnessVKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := log.OpenCheckpoint(b, sc.keys.verifier)
	if err != nil || c.Size == 0 || c.Size > size {
		t.Errorf("the cosigned checkpoint: size %d of the log's %d (%v)", c.Size, size, err)
	}
	if _, err := note.Open(b, note.VerifierList(wv)); err != nil {
		t.Errorf("the cosigned checkpoint's cosignature: %v", err)
	}

	// The retention index: loaded as saved, ending at the log's size,
	// the kept call's result (59c6...) in it, the purged ones marked.
	sc.ages.mu.Lock()
	next, ages := sc.ages.next, len(sc.ages.ages)
	kept, ok := sc.ages.ages["59c6a299c32df4b54c8963f60de2f51b5be0aa3e98e194de57375050ff13ea0b"]
	sc.ages.mu.Unlock()
	if next != size || ages == 0 || !ok || kept.purged {
		t.Errorf("the retention index: next %d of %d, %d blobs, the kept result %v (in it: %v), want it loaded as saved", next, size, ages, kept, ok)
	}

	// OAuth data: the issuer's namespace, in auth-namespaces, stays
	// reserved for its actors.
	l, err := readNamespaces(data)
	if err != nil || !l.found || len(l.prefixes) != 1 || l.prefixes[0] != "idp:" {
		t.Errorf("auth-namespaces: %+v (%v), want idp:", l, err)
	}
	path := filepath.Join(t.TempDir(), "provlog.yaml")
	writeFile(t, path, []byte("data: "+data+"\nactors: [{id: \"idp:bob\", token_sha256: "+strings.Repeat("ab", 32)+"}]\n"))
	if _, err := loadConfig(path); err == nil || !strings.Contains(err.Error(), authNamespacesFile) {
		t.Errorf("a static actor in the old issuer's namespace: %v", err)
	}
}
