package bundle

import (
	"context"
	"crypto"
	"crypto/x509"

	"github.com/provlog/provlog/log"
)

// Pins is the trust an auditor brings from a source of their own in place
// of the bundle's: log.vkey, witnesses.txt and the trust/ files are
// written by whoever wrote the bundle, so a forger can put in a log key,
// witnesses and authorities of their own, and the bundle alone verifies.
// Each pin set replaces that part of the bundle's trust for the check;
// the bundle's files are still checked against its manifest.
type Pins struct {
	// VKey is the log's verifier key: the bundle's log.vkey must be it.
	VKey string
	// Witnesses, when set, is the policy the checkpoint must meet, in
	// place of witnesses.txt's.
	Witnesses *log.WitnessPolicy
	// TSARoots and RekorKeys, when set, are the only roots the anchor
	// records' tokens and the only keys their Rekor entries may verify
	// with; a part not pinned comes from trust/, or from each record
	// when the bundle has no trust/.
	TSARoots  []*x509.Certificate
	RekorKeys []crypto.PublicKey
	// TSAs, when set in place of TSARoots, pin each TSA's own roots
	// ([ParseTSARoots] of a file naming them): a token counts only under
	// the roots pinned for the URL it is stored under.
	TSAs []TSARoots
}

// Pinned says which of a check's trust was pinned by its caller ([Pins]).
type Pinned struct {
	VKey      bool `json:"vkey"`
	Witnesses bool `json:"witnesses"`
	TSARoots  bool `json:"tsa_roots"`
	RekorKeys bool `json:"rekor_keys"`
}

func (p Pins) pinned() Pinned {
	return Pinned{VKey: p.VKey != "", Witnesses: p.Witnesses != nil, TSARoots: len(p.TSARoots) > 0 || len(p.TSAs) > 0, RekorKeys: len(p.RekorKeys) > 0}
}

// pinTrust puts the pinned authorities in place of trust/'s, once
// readTrust has read trust/.
func (c *checker) pinTrust() {
	pd := c.rep.Pinned
	if !pd.TSARoots && !pd.RekorKeys {
		return
	}
	t := &Trust{}
	if c.trust != nil {
		*t = *c.trust
	}
	if pd.TSARoots {
		t.TSARoots, t.TSAs = c.pins.TSARoots, c.pins.TSAs
	}
	if pd.RekorKeys {
		t.RekorKeys = c.pins.RekorKeys
	}
	c.carry = c.trust == nil
	c.trust, c.rep.SelfTrusted = t, false
}

// trustFor is the trust a record is verified against: c.trust, with the
// part not pinned taken from the record itself when the bundle has no
// trust/ (c.carry).
func (c *checker) trustFor(ctx context.Context, record []byte) *Trust {
	if !c.carry {
		return c.trust
	}
	t := *c.trust
	if r, _ := c.verifyAnchor(ctx, record, c.v, c.anchorKey, nil); r != nil {
		if !c.rep.Pinned.TSARoots {
			t.TSARoots, t.TSAs = r.Carried.TSARoots, r.Carried.TSAs
		}
		if !c.rep.Pinned.RekorKeys {
			t.RekorKeys = r.Carried.RekorKeys
		}
	}
	return &t
}

// blameTrust names the trust a record (file name) fails against when the
// record is sound by the roots and keys it carries itself (self): then
// what differs is the trust (a bundled file changed, or naming other
// authorities; or not the authorities the caller pinned), not the record.
func (c *checker) blameTrust(record []byte, self, trust *Trust, name string) {
	if _, err := c.verifyAnchor(c.ctx, record, c.v, c.anchorKey, self); err != nil {
		return // the record itself is broken
	}
	parts := []struct {
		pinned bool
		file   string
		what   string
		trust  *Trust
	}{
		{c.rep.Pinned.RekorKeys, RekorKeysFile, "Rekor keys", &Trust{TSARoots: self.TSARoots, TSAs: self.TSAs, RekorKeys: trust.RekorKeys}},
		{c.rep.Pinned.TSARoots, TSARootsFile, "TSA roots", &Trust{TSARoots: trust.TSARoots, TSAs: trust.TSAs, RekorKeys: self.RekorKeys}},
	}
	for _, p := range parts {
		if _, err := c.verifyAnchor(c.ctx, record, c.v, c.anchorKey, p.trust); err == nil {
			continue
		}
		if p.pinned {
			c.bad(name, "verifies by the %s it carries but not by the ones you gave", p.what)
		} else {
			c.bad(p.file, "%s verifies by the %s it carries but not by these", name, p.what)
		}
	}
}
