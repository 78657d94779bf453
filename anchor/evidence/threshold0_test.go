package evidence_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestWitnessThresholdZero: a forger adds to an evidence a witnesses.txt
// of "threshold 0" and a well-known witness's key, which never cosigned,
// and rewrites manifest.json to match (Write refuses a threshold of 0:
// TestWriteThresholdZero). A threshold of 0 requires no cosignature, so the
// checkpoint meets it: the report says "cosigned by 0 of 1 witnesses"
// and its "missing: no witness policy: nobody but the log vouches that
// the log did not fork" is gone. Verify must refuse it, naming
// witnesses.txt, as verify-bundle refuses a bundle's.
func TestWitnessThresholdZero(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	i := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	l.anchorNow()
	_, famous, err := log.GenerateCosignerKey(rand.Reader, "witness.example/famous")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ev")
	m, err := evidence.Write(ctx, dir, l.options(i))
	if err != nil {
		t.Fatal(err)
	}
	policy := log.FormatWitnessPolicy([]string{famous}, 0)
	if err := os.WriteFile(filepath.Join(dir, evidence.WitnessesFile), policy, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(policy)
	m.Files[evidence.WitnessesFile] = hex.EncodeToString(sum[:])
	m.Cosigned = true
	m.Missing = slices.DeleteFunc(m.Missing, func(s string) bool { return strings.HasPrefix(s, "no witness policy") })
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, evidence.ManifestFile), append(mb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, dir, l.vkey)
	if err == nil {
		t.Errorf("an evidence whose witnesses.txt has threshold 0 verifies:\n%s", rep.String())
	} else if !strings.Contains(err.Error(), evidence.WitnessesFile) || !strings.Contains(err.Error(), "threshold 0") {
		t.Errorf("Verify: %v\nwant it to name %s and its threshold 0", err, evidence.WitnessesFile)
	}
}

// TestWriteThresholdZero: an API caller gives Write a witness and a
// threshold of 0 (no config makes one). Verify refuses such a directory
// ("threshold 0 requires no cosignature"), so Write must refuse it too,
// saying so, and write nothing.
func TestWriteThresholdZero(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	i := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file", "args": map[string]any{"path": "/x"}})
	l.anchorNow()
	_, w, err := log.GenerateCosignerKey(rand.Reader, "witness.example/w")
	if err != nil {
		t.Fatal(err)
	}
	o := l.options(i)
	o.Witnesses, o.Threshold = []string{w}, 0
	dir := filepath.Join(t.TempDir(), "ev")
	m, err := evidence.Write(ctx, dir, o)
	if err == nil || !strings.Contains(err.Error(), "threshold 0") {
		t.Errorf("Write with 1 witness and threshold 0: manifest %+v, err %v; want it refused for its threshold 0", m, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Write refused or not, %s is there (%v); want nothing written", dir, err)
	}
}
