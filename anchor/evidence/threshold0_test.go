package evidence_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log"
)

// TestWitnessThresholdZero: a forger adds to an evidence a witnesses.txt
// of "threshold 0" and a well-known witness's key, which never cosigned,
// and rewrites manifest.json to match (here Write makes that directory:
// no config makes a threshold of 0, a sidecar's defaults to all its
// witnesses). A threshold of 0 requires no cosignature, so the
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
	o := l.options(i)
	o.Witnesses, o.Threshold = []string{famous}, 0
	dir := filepath.Join(t.TempDir(), "ev")
	if _, err := evidence.Write(ctx, dir, o); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, dir, l.vkey)
	if err == nil {
		t.Errorf("an evidence whose witnesses.txt has threshold 0 verifies:\n%s", rep.String())
	} else if !strings.Contains(err.Error(), evidence.WitnessesFile) || !strings.Contains(err.Error(), "threshold 0") {
		t.Errorf("Verify: %v\nwant it to name %s and its threshold 0", err, evidence.WitnessesFile)
	}
}
