package bundle_test

import (
	"context"
	"crypto"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log/bundle"
)

// TestAnchorsOnEntries: the report counts the anchors whose root the
// bundle ties to its entries' tree (by the entries, or, for [3, 5), whose
// entries do not reach the anchored size, by consistency.json); and an
// anchor at the checkpoint's own size that anchors another root (the log
// signed two trees of one size) fails whatever range the bundle holds (it
// passed in a bundle not starting at entry 0). The second root is made by
// changing what the real anchor check returns: making the log sign a fork
// and anchoring it would test the anchor package, not this check.
func TestAnchorsOnEntries(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 5, true)
	for _, tc := range []struct {
		from, to uint64
		tied     int
	}{{0, 0, 1}, {3, 5, 1}} {
		dir := f.export(t, tc.from, tc.to)
		rep, err := bundle.Verify(ctx, dir, anchor.VerifyBundled)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Anchors != 1 || rep.AnchorsOnEntries != tc.tied {
			t.Errorf("[%d, %d): %d anchors, %d tied to the entries; want 1, %d", tc.from, tc.to, rep.Anchors, rep.AnchorsOnEntries, tc.tied)
		}
	}

	// A bundle not from entry 0, whose anchor is made to anchor a root
	// of zeros at the checkpoint's size.
	dir := f.export(t, 2, 0)
	rep, err := bundle.Verify(ctx, dir, anchor.VerifyBundled)
	if err != nil {
		t.Fatal(err)
	}
	forked := func(ctx context.Context, record []byte, v note.Verifier, key crypto.PublicKey, trust *bundle.Trust) (*bundle.Anchored, error) {
		a, err := anchor.VerifyBundled(ctx, record, v, key, trust)
		if err == nil {
			a.Size = rep.Manifest.Size
			a.Root = make([]byte, len(a.Root))
		}
		return a, err
	}
	_, err = bundle.Verify(ctx, dir, forked)
	var ve *bundle.VerifyError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0].Part, "anchors/") ||
		!strings.Contains(ve.Problems[0].Msg, "the log signed two trees of one size") {
		t.Errorf("an anchor of another root at the checkpoint's size: %v", err)
	}
}
