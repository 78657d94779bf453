package anchor

import (
	"context"
	"crypto"

	"golang.org/x/mod/sumdb/note"

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
	}
	if _, err := Verify(ctx, r, v, anchorKey, t); err != nil {
		return a, err
	}
	return a, nil
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
