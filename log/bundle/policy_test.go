package bundle_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/log/logtest"
)

// TestWitnessPolicy: a bundle states the k-of-n witness policy it was
// exported under, and Verify holds the checkpoint to it.
func TestWitnessPolicy(t *testing.T) {
	f := newFixture(t, 3, false)
	f.witnessThreshold = 2
	ws := newWitnesses(t, "witness.test/w1", "witness.test/w2", "witness.test/w3")
	outsider := newWitnesses(t, "witness.test/outsider")[0]
	var keys []string
	for _, w := range ws {
		keys = append(keys, w.Verifier().String())
	}
	export := func(t *testing.T, by ...*log.CosignatureSigner) string {
		t.Helper()
		dir, err := f.exportCheckpoint(t, f.cosignedBy(t, by...), keys, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	verified := func(t *testing.T, dir string, threshold int, cosigners ...string) *bundle.Report {
		t.Helper()
		rep, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Witnesses != 3 || rep.Threshold != threshold || !slices.Equal(rep.Cosigners, cosigners) || !rep.Manifest.Cosigned {
			t.Errorf("report: %d witnesses, threshold %d, cosigners %v; want 3, %d, %v", rep.Witnesses, rep.Threshold, rep.Cosigners, threshold, cosigners)
		}
		return rep
	}

	t.Run("two of three", func(t *testing.T) {
		dir := export(t, ws[2], ws[0])
		b, _ := os.ReadFile(filepath.Join(dir, bundle.WitnessesFile))
		if want := "threshold 2\n" + strings.Join(keys, "\n") + "\n"; string(b) != want {
			t.Errorf("%s is %q, want %q", bundle.WitnessesFile, b, want)
		}
		if rep := verified(t, dir, 2, "witness.test/w1", "witness.test/w3"); rep.NoThreshold {
			t.Error("report says witnesses.txt names no threshold")
		}
	})
	t.Run("an unlisted key's cosignature is ignored", func(t *testing.T) {
		verified(t, export(t, ws[0], outsider, ws[1]), 2, "witness.test/w1", "witness.test/w2")
	})
	t.Run("one of three is not exported", func(t *testing.T) {
		_, err := f.exportCheckpoint(t, f.cosignedBy(t, ws[1], outsider), keys, "", 0, 0)
		if err == nil || !strings.Contains(err.Error(), "is cosigned by 1 of 3 witnesses (policy: 2 of 3): witness.test/w2: it does not meet") {
			t.Errorf("export: %v", err)
		}
	})
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		part   string
		msg    string
	}{
		{"cosigned by one of three", func(t *testing.T, dir string) {
			rewrite(t, dir, bundle.CheckpointFile, f.cosignedBy(t, ws[1], outsider))
		}, bundle.CheckpointFile, "is cosigned by 1 of 3 witnesses (policy: 2 of 3): witness.test/w2, fewer than the policy of witnesses.txt requires"},
		{"a listed witness's cosignature tampered with", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, bundle.CheckpointFile))
			rewrite(t, dir, bundle.CheckpointFile, logtest.CorruptSignature(t, b, "witness.test/w3"))
		}, bundle.CheckpointFile, "the signature by witness.test/w3"},
		{"witnesses.txt claims a policy the checkpoint does not meet", func(t *testing.T, dir string) {
			rewrite(t, dir, bundle.WitnessesFile, log.FormatWitnessPolicy(keys, 3))
		}, bundle.CheckpointFile, "is cosigned by 2 of 3 witnesses (policy: 3 of 3): witness.test/w1, witness.test/w3, fewer than"},
		{"threshold 0", func(t *testing.T, dir string) {
			rewrite(t, dir, bundle.WitnessesFile, log.FormatWitnessPolicy(keys, 0))
		}, bundle.WitnessesFile, "threshold 0 requires no cosignature"},
		{"old layout, not all cosigned", func(t *testing.T, dir string) {
			stripThreshold(t, dir)
		}, bundle.CheckpointFile, "is cosigned by 2 of 3 witnesses (policy: 3 of 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := export(t, ws[0], ws[2])
			tc.tamper(t, dir)
			_, err := bundle.Verify(context.Background(), dir, anchor.VerifyBundled)
			var ve *bundle.VerifyError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Part != tc.part || !strings.Contains(ve.Problems[0].Msg, tc.msg) {
				t.Errorf("Verify: %v; want one problem with %s: %q", err, tc.part, tc.msg)
			}
		})
	}
	// A bundle made before witnesses.txt stated a threshold requires all
	// the witnesses it lists, as it did.
	t.Run("old layout, all cosigned", func(t *testing.T) {
		dir := export(t, ws[0], ws[1], ws[2])
		stripThreshold(t, dir)
		if rep := verified(t, dir, 3, "witness.test/w1", "witness.test/w2", "witness.test/w3"); !rep.NoThreshold {
			t.Error("report does not say witnesses.txt names no threshold")
		}
	})
}

// rewrite replaces a bundle file and its hash in the manifest.
func rewrite(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	fixManifest(t, dir, name, b)
}

// stripThreshold makes a bundle's witnesses.txt what provlog wrote before
// it stated the policy's threshold: the keys alone.
func stripThreshold(t *testing.T, dir string) {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, bundle.WitnessesFile))
	th, keys, ok := bytes.Cut(b, []byte("\n"))
	if !ok || !bytes.HasPrefix(th, []byte("threshold ")) {
		t.Fatalf("%s is %q", bundle.WitnessesFile, b)
	}
	rewrite(t, dir, bundle.WitnessesFile, keys)
}
