package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// rewriteBundleFile is a forger's edit of a bundle: file name gets b and
// manifest.json lists its SHA-256 (edit, when not nil, changes the
// manifest too), so that every hash in the bundle still matches.
func rewriteBundleFile(t *testing.T, dir, name string, b []byte, edit func(*bundle.Manifest)) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	editManifest(t, dir, func(m *bundle.Manifest) {
		m.Files[name] = hex.EncodeToString(s[:])
		if edit != nil {
			edit(m)
		}
	})
}

// editManifest is a forger's edit of a bundle's manifest.json.
func editManifest(t *testing.T, dir string, edit func(*bundle.Manifest)) {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(dir, bundle.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m bundle.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if mb, err = json.MarshalIndent(&m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestFile), append(mb, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyBundleOwnWitnessesSaid: a forger holding a genuine bundle of
// a log no witness cosigns adds a cosignature of their own witness (named
// like a well-known one) to its checkpoint, and a witnesses.txt naming
// it. The log's signature still verifies, so verify-bundle, even with the
// genuine log key pinned, passes it; its OK line must then say that the
// witnesses are the bundle's own witnesses.txt, not pinned, as it says
// of log.vkey and the trust roots, else "cosigned by 1 of 1 witnesses"
// reads as a witness's word. Pinned to the genuine witness it fails.
func TestVerifyBundleOwnWitnessesSaid(t *testing.T) {
	data := makeDataDir(t, 4)
	b := exportBundle(t, data, "")
	vkeyFile := filepath.Join(data, logVKeyFile)
	vkey, err := readVKey(vkeyFile)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	_, genuine, _ := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	fkey, forged, _ := log.GenerateCosignerKey(rand.Reader, "witness.example/w1")
	forger, err := log.ParseCosignerKey(fkey)
	if err != nil {
		t.Fatal(err)
	}
	cpB, err := os.ReadFile(filepath.Join(b, bundle.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(cpB, note.VerifierList(v))
	if err != nil {
		t.Fatal(err)
	}
	cosigned, err := note.Sign(n, forger)
	if err != nil {
		t.Fatal(err)
	}
	rewriteBundleFile(t, b, bundle.CheckpointFile, cosigned, nil)
	rewriteBundleFile(t, b, bundle.WitnessesFile, log.FormatWitnessPolicy([]string{forged}, 1), func(m *bundle.Manifest) { m.Cosigned = true })

	out, code := runCmd(t, "verify-bundle", "--vkey", vkeyFile, b)
	if code != 0 || !strings.Contains(out, "cosigned by 1 of 1 witnesses (policy: 1 of 1): witness.example/w1") {
		t.Fatalf("the forged cosignature, log key pinned: %d\n%s", code, out)
	}
	if !strings.Contains(out, "under the bundle's own witnesses.txt (not pinned") {
		t.Errorf("the OK line does not say the witness policy is the bundle's own, not pinned:\n%s", out)
	}
	out, code = runCmd(t, "verify-bundle", "--vkey", vkeyFile, "--witness", genuine, b)
	if code != 1 || !strings.Contains(out, "checkpoint: is cosigned by 0 of 1 witnesses") {
		t.Errorf("the forged cosignature, the genuine witness pinned: %d\n%s", code, out)
	}
}

// TestVerifyBundleRecordsLeftOutSaid: a forger holding a genuine bundle
// of an anchored log deletes its anchor record (which could show a fork)
// and rewrites the manifest's anchor_sidecar, which nothing signs, to
// another id. The anchor entry naming the record then reads as another
// sidecar's of a shared log: verify-bundle passes it, even with the log
// key pinned, saying "1 anchor entries made by other sidecars of this
// log". It must name the sidecar the entry names and say that which
// sidecar the bundle was exported through is only the manifest's word,
// so the auditor can see the record left out is the exporter's own.
func TestVerifyBundleRecordsLeftOutSaid(t *testing.T) {
	a := anchoredDataDir(t)
	b := exportBundle(t, a.data, "")
	own, err := os.ReadFile(filepath.Join(a.data, anchorDir, anchor.SidecarFile))
	if err != nil {
		t.Fatal(err)
	}
	sidecar := strings.TrimSpace(string(own))
	recs, _ := filepath.Glob(filepath.Join(b, bundle.AnchorsDir, "*.json"))
	if len(recs) != 1 {
		t.Fatalf("the bundle holds records %v, want 1", recs)
	}
	if err := os.RemoveAll(filepath.Join(b, bundle.AnchorsDir)); err != nil {
		t.Fatal(err)
	}
	editManifest(t, b, func(m *bundle.Manifest) {
		if m.AnchorSidecar != sidecar {
			t.Fatalf("the manifest's anchor_sidecar is %q, the data dir's %q", m.AnchorSidecar, sidecar)
		}
		delete(m.Files, bundle.AnchorsDir+"/"+filepath.Base(recs[0]))
		m.AnchorSidecar, m.Trust = "0123456789abcdef", ""
	})
	out, code := runCmd(t, "verify-bundle", "--vkey", filepath.Join(a.data, logVKeyFile), b)
	if code != 0 || !strings.Contains(out, "no anchor records; 1 anchor entries made by other sidecars of this log") {
		t.Fatalf("the bundle with its record left out: %d\n%s", code, out)
	}
	if !strings.Contains(out, "sidecar "+sidecar) || !strings.Contains(out, "anchor_sidecar 0123456789abcdef, which nothing in the bundle signs") {
		t.Errorf("verify-bundle names neither the entry's sidecar %s nor the manifest's anchor_sidecar as unsigned:\n%s", sidecar, out)
	}
}
