package bundle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log/bundle"
)

// TestAnchorEntryWithoutRecord: the entries of a bundle hold anchor
// entries, each naming its record and the record's SHA-256. A bundle
// whose anchor records (and trust/) were deleted, its manifest rewritten,
// must not verify as a bundle with "no anchor records": the entries say
// there were. provlog audit refuses the same thing in a data dir ("anchor
// entry N: names record X, which is not stored"). Before, Verify checked
// that each record was named by an anchor entry in the range, not that
// each anchor entry in the range had its record (seen with provlog
// verify-bundle: OK, "no anchor records", on a bundle of a log anchored
// three times).
func TestAnchorEntryWithoutRecord(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 3, true)
	dir := f.export(t, 0, 0)
	if rep, err := bundle.Verify(ctx, dir, anchor.VerifyBundled); err != nil || rep.Anchors != 1 {
		t.Fatalf("the exported bundle: %v (%+v)", err, rep)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, bundle.EntriesFile)); !strings.Contains(string(b), `"kind":"anchor"`) {
		t.Fatal("the bundle's entries hold no anchor entry; the test is wrong")
	}
	p := filepath.Join(dir, bundle.ManifestFile)
	var m bundle.Manifest
	mb, _ := os.ReadFile(p)
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	for name := range m.Files {
		if strings.HasPrefix(name, "anchors/") || strings.HasPrefix(name, "trust/") {
			delete(m.Files, name)
			os.Remove(filepath.Join(dir, filepath.FromSlash(name)))
		}
	}
	m.Trust = ""
	out, _ := json.MarshalIndent(m, "", "  ")
	os.WriteFile(p, append(out, '\n'), 0o644)
	rep, err := bundle.Verify(ctx, dir, anchor.VerifyBundled)
	if err == nil {
		t.Errorf("a bundle whose anchor entry's record was removed verifies (%d anchor records)", rep.Anchors)
	}
}

// TestAnchorEntriesOfOtherSidecars: on a log shared by several sidecars,
// a bundle exported through one holds its records only; the anchor
// entries of the others name records kept in their data dirs. Such a
// bundle verifies, and its report counts those entries, which it could
// not check against records (it failed: "anchors/…: is missing"). Here
// the bundle is exported through a sidecar with no records of its own.
func TestAnchorEntriesOfOtherSidecars(t *testing.T) {
	f := newFixture(t, 3, true)
	cp, ws := f.checkpoint(t)
	dir, err := f.exportCheckpoint(t, cp, ws, t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	if err != nil || rep.Anchors != 0 || rep.AnchorEntriesElsewhere != 1 {
		t.Fatalf("a bundle of a shared log exported through another sidecar: %v (%+v)", err, rep)
	}
}
