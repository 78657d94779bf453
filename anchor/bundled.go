package anchor

import (
	"context"
	"crypto"
	"fmt"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

// VerifyBundled is this package's check of an exported bundle's anchor
// records, a [bundle.VerifyAnchorFunc]: it parses the record and runs
// [Verify] against trust (nil: the roots the record carries).
func VerifyBundled(ctx context.Context, record []byte, v note.Verifier, anchorKey crypto.PublicKey, trust *bundle.Trust) (*bundle.Anchored, error) {
	r, err := ParseRecord(record)
	if err != nil {
		return nil, err
	}
	carried := TrustFromRecord(r)
	a := &bundle.Anchored{Size: r.Size, Root: r.Root,
		Carried: bundle.Trust{TSARoots: carried.TSARoots, RekorKeys: carried.RekorKeys}}
	var t *Trust
	if trust != nil {
		t = &Trust{TSARoots: trust.TSARoots, RekorKeys: trust.RekorKeys}
		for _, a := range trust.TSAs {
			t.TSAs = append(t.TSAs, TSATrust{URL: a.URL, Roots: a.Roots})
		}
	}
	if _, err := Verify(ctx, r, v, anchorKey, t); err != nil {
		return a, err
	}
	return a, nil
}

// NewBundleVerifier returns the check of one bundle's anchor records, a
// [bundle.VerifyAnchorFunc] to call on them in the order they were made
// (the bundle's by name): each is [VerifyBundled], then compared with
// those verified before it as [AuditAll] compares a data dir's (two Rekor
// checkpoints of one tree and size with different roots are a Rekor
// fork; an entry's consistency proof starts from the Rekor checkpoint of
// the record before). A record is compared once, when it first
// verifies; a later call on it returns what was found then.
func NewBundleVerifier() bundle.VerifyAnchorFunc {
	var h rekorHistory
	found := map[string][]log.Problem{}
	return func(ctx context.Context, record []byte, v note.Verifier, anchorKey crypto.PublicKey, trust *bundle.Trust) (*bundle.Anchored, error) {
		a, err := VerifyBundled(ctx, record, v, anchorKey, trust)
		if err != nil {
			return a, err
		}
		sum := sha256Hex(record)
		probs, ok := found[sum]
		if !ok {
			r, err := ParseRecord(record)
			if err != nil {
				return a, err
			}
			probs = h.add(fmt.Sprintf("%020d-%s.json", r.Size, sum[:16]), r)
			found[sum] = probs
		}
		if len(probs) > 0 {
			return a, &log.ProblemsError{What: "anchor record", Problems: probs}
		}
		return a, nil
	}
}

// ReadBundled returns the size and root an anchor record anchors, for
// bundle.ExportOptions.ReadAnchor; it does not verify the record.
func ReadBundled(record []byte) (uint64, []byte, error) {
	r, err := ParseRecord(record)
	if err != nil {
		return 0, nil, err
	}
	return r.Size, r.Root, nil
}
