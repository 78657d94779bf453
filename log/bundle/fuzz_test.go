package bundle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log/bundle"
)

// FuzzVerify hands verify-bundle untrusted bytes in the files it parses
// first: the manifest, the tree file and the checkpoint (the manifest's
// hash fixed up to match, so only the content checks stand in the way).
// Verify must never panic, and whatever it accepts must vouch for exactly
// what the exported bundle does: the same origin, size, root and entries.
// (A tree file written differently but proving the same root is fine: the
// signed checkpoint, not the tree file, is what the entries are held to.)
func FuzzVerify(f *testing.F) {
	fx := newFixture(f, 3, false)
	src := fx.export(f, 0, 0)
	want, err := bundle.Verify(context.Background(), src, anchor.VerifyBundled)
	if err != nil {
		f.Fatal(err)
	}
	orig := map[string][]byte{}
	names := []string{bundle.ManifestFile, bundle.TreeFile, bundle.CheckpointFile}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			f.Fatal(err)
		}
		orig[n] = b
		f.Add(uint8(len(orig)-1), b)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name := names[int(which)%len(names)]
		if string(data) == string(orig[name]) {
			return
		}
		dir := copyDir(t, src)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != bundle.ManifestFile {
			fixManifest(t, dir, name, data)
		}
		got, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
		if err != nil {
			return
		}
		if got.Entries != want.Entries || got.Manifest.Origin != want.Manifest.Origin ||
			got.Manifest.Size != want.Manifest.Size || got.Manifest.Root != want.Manifest.Root ||
			got.Manifest.From != want.Manifest.From || got.Manifest.To != want.Manifest.To {
			t.Fatalf("a bundle with a changed %s verified and vouches for something else: %+v", name, got.Manifest)
		}
	})
}

// FuzzVerifyConsistency hands verify-bundle untrusted bytes as
// consistency.json of a bundle whose anchor record lies past its entries
// (the manifest's hash fixed up to match). Verify must never panic, and
// whatever it accepts must tie the record as the exported file does: to
// the same root, which the record and the checkpoint fix.
func FuzzVerifyConsistency(f *testing.F) {
	fx := newFixture(f, 2, true)
	src := fx.export(f, 3, 5)
	want, err := bundle.Verify(context.Background(), src, anchor.VerifyBundled)
	if err != nil || want.AnchorsByProof != 1 {
		f.Fatalf("the bundle of [3, 5): %v, %+v", err, want)
	}
	orig, err := os.ReadFile(filepath.Join(src, bundle.ConsistencyFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(orig)
	f.Fuzz(func(t *testing.T, data []byte) {
		if string(data) == string(orig) {
			return
		}
		dir := copyDir(t, src)
		if err := os.WriteFile(filepath.Join(dir, bundle.ConsistencyFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fixManifest(t, dir, bundle.ConsistencyFile, data)
		got, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
		if err == nil && (got.AnchorsOnEntries != want.AnchorsOnEntries || got.AnchorsByProof != want.AnchorsByProof) {
			t.Fatalf("a changed %s verified and ties %d records (%d by proof), not %d (%d)", bundle.ConsistencyFile,
				got.AnchorsOnEntries, got.AnchorsByProof, want.AnchorsOnEntries, want.AnchorsByProof)
		}
	})
}
