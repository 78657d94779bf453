package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// TestEvidenceSkipsMisdatedAnchor: a data dir whose one anchor record
// has a token dated 2001 over its latest checkpoint, as stored before
// anchor/online refused such answers. provlog evidence leaves the record
// out, names it and both times on stderr, and writes evidence without an
// anchor whose "missing" says why; verify-evidence passes and says the
// same. (provlog evidence used the record and then failed its own
// check: "the evidence written to ... does not verify".)
func TestEvidenceSkipsMisdatedAnchor(t *testing.T) {
	ctx := context.Background()
	data := makeDataDir(t, 4)
	k, st := dataState(t, data)
	cp, err := log.ParseCheckpointNote(st.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	pki := testtsa.NewPKI(t, "Old TSA", true, at.Add(-time.Hour), time.Now().Add(time.Hour))
	digest := anchor.CheckpointDigest(st.Checkpoint)
	records, err := anchor.OpenStore(filepath.Join(data, anchorDir))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := records.Put(&anchor.Record{V: anchor.RecordVersion, Checkpoint: string(st.Checkpoint), Origin: cp.Origin, Size: cp.Size,
		Root: cp.Hash, Digest: hex.EncodeToString(digest), AnchorKey: k.anchorPub, Tlogs: []*anchor.Tlog{}, Created: time.Now().UTC(),
		Timestamps: []*rfc3161.Token{pki.Token(t, "https://tsa.example/old", digest, at)}})
	if err != nil {
		t.Fatal(err)
	}

	ev := filepath.Join(t.TempDir(), "ev")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"evidence", "--data", data, "--index", "2", "--out", ev}, &stdout, &stderr); code != 0 {
		t.Fatalf("provlog evidence: %d\n%s%s", code, stdout.String(), stderr.String())
	}
	skipped := "evidence: anchor record " + stored.Name + " is not used: anchor record does not verify (1 problem): timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is "
	if !strings.Contains(stderr.String(), skipped) || !strings.Contains(stderr.String(), "before the time of entry ") {
		t.Errorf("stderr lacks %q ... before the time of entry:\n%s", skipped, stderr.String())
	}
	missing := "missing: no anchor whose times hold covers the entry: the smallest anchor covering it, of size 5 (skipped/anchor.json), was left out: timestamp 0 (https://tsa.example/old): time 2001-01-01T00:00:00Z is "
	if !strings.Contains(stdout.String(), missing) {
		t.Errorf("provlog evidence output lacks %q:\n%s", missing, stdout.String())
	}
	out, code := runCmd(t, "verify-evidence", "--vkey", filepath.Join(data, logVKeyFile), ev)
	if code != 0 || !strings.Contains(out, missing) {
		t.Errorf("verify-evidence: %d, want 0 and %q:\n%s", code, missing, out)
	}
}

// dataState returns the keys of the data dir data and its log's state.
func dataState(t *testing.T, data string) (*keys, log.State) {
	t.Helper()
	k, err := loadKeys(data)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openStore(data, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.State(context.Background())
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	return k, st
}
