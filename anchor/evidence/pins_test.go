package evidence_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/anchortest/testtsa"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
)

// names reports whether err is a VerifyError with a problem on part.
func names(err error, part string) bool {
	var ve *evidence.VerifyError
	if !errors.As(err, &ve) {
		return false
	}
	for _, p := range ve.Problems {
		if p.Part == part {
			return true
		}
	}
	return false
}

// TestPinnedTrust verifies an anchored, cosigned evidence with the
// witness keys, TSA roots and Rekor key pinned by the caller: the right
// ones pass and say so; another TSA root or Rekor key fails naming the
// token or the Rekor entry.
func TestPinnedTrust(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	if _, err := l.runner.AnchorNow(ctx); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ev")
	if _, err := evidence.Write(ctx, dir, l.options(call)); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, dir, l.vkey)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"witness keys: from the directory (not pinned)", "TSA roots: from the directory (not pinned)", "Rekor keys: from the directory (not pinned)"} {
		if !strings.Contains(rep.TrustString(), want) {
			t.Errorf("unpinned trust lacks %q:\n%s", want, rep.TrustString())
		}
	}

	good := evidence.Pins{Witnesses: []string{l.witness.Verifier().String()}, Threshold: 1, TSARoots: l.trust.TSARoots, RekorKeys: l.trust.RekorKeys}
	rep, err = evidence.VerifyPinned(ctx, dir, l.vkey, good)
	if err != nil {
		t.Fatalf("pinned correct trust: %v", err)
	}
	for _, want := range []string{"witness keys: pinned by you", "TSA roots: pinned by you", "Rekor keys: pinned by you"} {
		if !strings.Contains(rep.TrustString(), want) {
			t.Errorf("pinned trust lacks %q:\n%s", want, rep.TrustString())
		}
	}
	if !strings.Contains(rep.String(), "cosigned by 1 of 1 witnesses (witness.test/w1)") {
		t.Errorf("report:\n%s", rep)
	}

	bad := good
	bad.TSARoots = []*x509.Certificate{testtsa.New(t, "Other TSA").PKI.Root}
	if _, err := evidence.VerifyPinned(ctx, dir, l.vkey, bad); !names(err, evidence.TimestampsDir+"/0.tst") {
		t.Errorf("another pinned TSA root: %v", err)
	}
	rk, err := online.LoadPublicKey(nil, string(fakerekor.New(t).PublicKeyPEM()))
	if err != nil {
		t.Fatal(err)
	}
	bad = good
	bad.RekorKeys = []crypto.PublicKey{rk}
	if _, err := evidence.VerifyPinned(ctx, dir, l.vkey, bad); !names(err, evidence.RekorDir+"/0.json") {
		t.Errorf("another pinned Rekor key: %v", err)
	}

	// Pins that are no policy are refused before the directory is read.
	for _, p := range []evidence.Pins{{Threshold: 1}, {Witnesses: good.Witnesses, Threshold: 2}, {Witnesses: good.Witnesses}, {Witnesses: []string{"not a key"}, Threshold: 1}} {
		if _, err := evidence.VerifyPinned(ctx, dir, l.vkey, p); err == nil || names(err, evidence.CheckpointFile) {
			t.Errorf("pins %+v: %v", p, err)
		}
	}
}

// TestForgedWitnesses writes an evidence whose witnesses.txt names a
// forger's witness key (with the genuine witness's name) and whose
// checkpoint carries the forger's cosignature: without pinning it passes,
// and says the witness keys came from the directory; pinned to the
// genuine witness it fails, naming witnesses.txt.
func TestForgedWitnesses(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t)
	call := l.append(log.KindCall, "alice", map[string]any{"server": "fs", "tool": "write_file"})
	fkey, fvkey, err := log.GenerateCosignerKey(rand.Reader, "witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	forger, err := log.ParseCosignerKey(fkey)
	if err != nil {
		t.Fatal(err)
	}
	_, latest := l.seq.Checkpoint()
	cp, err := log.ParseCheckpointNote(latest)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := note.Sign(&note.Note{Text: cp.String()}, l.signer, forger)
	if err != nil {
		t.Fatal(err)
	}
	o := l.options(call)
	o.Witnesses, o.Threshold, o.Cosigned = []string{fvkey}, 1, [][]byte{forged}
	dir := filepath.Join(t.TempDir(), "forged")
	if _, err := evidence.Write(ctx, dir, o); err != nil {
		t.Fatal(err)
	}
	rep, err := evidence.Verify(ctx, dir, l.vkey)
	if err != nil {
		t.Fatalf("unpinned: %v", err)
	}
	if !strings.Contains(rep.String(), "cosigned by 1 of 1 witnesses (witness.test/w1)") || !strings.Contains(rep.TrustString(), "witness keys: from the directory (not pinned)") {
		t.Errorf("unpinned forged evidence:\n%s%s", rep, rep.TrustString())
	}
	genuine := []string{l.witness.Verifier().String()}
	_, err = evidence.VerifyPinned(ctx, dir, l.vkey, evidence.Pins{Witnesses: genuine, Threshold: 1})
	if !names(err, evidence.WitnessesFile) || !strings.Contains(err.Error(), "cosigned by 0 of the 1 witnesses you pinned") {
		t.Errorf("pinned to the genuine witness: %v", err)
	}
	// Pinned to the keys the directory does hold, it passes.
	if _, err := evidence.VerifyPinned(ctx, dir, l.vkey, evidence.Pins{Witnesses: []string{fvkey}, Threshold: 1}); err != nil {
		t.Errorf("pinned to the directory's own witness: %v", err)
	}
}
