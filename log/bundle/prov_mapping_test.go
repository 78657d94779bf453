package bundle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log/bundle"
)

// setProvMapping rewrites dir's manifest with prov_mapping v (0: none).
func setProvMapping(t *testing.T, dir string, v int) {
	t.Helper()
	p := filepath.Join(dir, bundle.ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m.ProvMapping = v
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantProvProblem wants Verify to fail on provenance.json alone.
func wantProvProblem(t *testing.T, dir, what string) {
	t.Helper()
	_, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	var ve *bundle.VerifyError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Part != bundle.ProvFile {
		t.Errorf("%s: %v; want one problem, in %s", what, err, bundle.ProvFile)
	}
}

// TestOldBundleProvMapping: bundles older provlogs exported, whose
// manifests name no PROV mapping (testdata, made by
// testdata/make-old-bundles.sh with that code; each has an OAuth call),
// still verify: mapping1, made before entries' auth members were mapped
// to PROV, under the first mapping; mapping2-unnamed, made with that
// mapping before the manifest named it, under the second. Named as made
// with the current mapping, the first's PROV document no longer matches:
// the pin is what makes it verify. A new bundle names the current
// mapping, and named with the old one fails the same way.
func TestOldBundleProvMapping(t *testing.T) {
	for dir, want := range map[string]int{"mapping1": bundle.ProvMappingNoAuth, "mapping2-unnamed": bundle.ProvMappingAuth} {
		old := filepath.Join("testdata", dir)
		mb, err := os.ReadFile(filepath.Join(old, bundle.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(mb, []byte("prov_mapping")) {
			t.Fatalf("testdata/%s names a PROV mapping: it is not a bundle from before the mapping was named", dir)
		}
		entries, err := os.ReadFile(filepath.Join(old, bundle.EntriesFile))
		if err != nil || !bytes.Contains(entries, []byte(`"auth":{`)) {
			t.Fatalf("testdata/%s has no entry with an auth member (%v)", dir, err)
		}
		rep, err := bundle.Verify(context.Background(), old, anchor.VerifyBundled)
		if err != nil {
			t.Fatalf("testdata/%s: %v", dir, err)
		}
		if rep.Manifest.ProvMapping != want {
			t.Errorf("testdata/%s was verified under mapping %d; want %d", dir, rep.Manifest.ProvMapping, want)
		}
	}
	old := filepath.Join("testdata", "mapping1")
	asNew := copyDir(t, old)
	setProvMapping(t, asNew, bundle.ProvMapping)
	wantProvProblem(t, asNew, "the old bundle named as made with the current mapping")

	dir := newFixture(t, 1, false).export(t, 0, 0)
	rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	if err != nil || rep.Manifest.ProvMapping != bundle.ProvMapping {
		t.Fatalf("a new bundle: %+v, %v; want mapping %d", rep, err, bundle.ProvMapping)
	}
	for _, v := range []int{bundle.ProvMappingNoAuth, bundle.ProvMappingAuth} {
		d := copyDir(t, dir)
		setProvMapping(t, d, v)
		wantProvProblem(t, d, fmt.Sprintf("a new bundle named as made with mapping %d", v))
	}

	setProvMapping(t, dir, bundle.ProvMapping+1)
	_, err = bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
	if want := fmt.Sprintf("prov_mapping %d is not a PROV mapping this verifier knows", bundle.ProvMapping+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a bundle from a newer mapping: %v", err)
	}
}

// TestNamedProvMapping2: a bundle exported under the second mapping
// after the manifest named it (testdata/mapping2, made by
// testdata/make-old-bundles.sh with 4627f52), whose genesis actor is an
// agent of its own, verifies under it; named as made with the current
// mapping, its PROV document does not match.
func TestNamedProvMapping2(t *testing.T) {
	old := filepath.Join("testdata", "mapping2")
	rep, err := bundle.Verify(context.Background(), old, anchor.VerifyBundled)
	if err != nil || rep.Manifest.ProvMapping != bundle.ProvMappingAuth {
		t.Fatalf("testdata/mapping2: %+v, %v; want mapping %d", rep, err, bundle.ProvMappingAuth)
	}
	asNew := copyDir(t, old)
	setProvMapping(t, asNew, bundle.ProvMapping)
	wantProvProblem(t, asNew, "the mapping 2 bundle named as made with the current mapping")
}
