package evidence

import (
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// Pins is the trust a verifier brings from a source of its own instead of
// taking the directory's: witnesses.txt, trust/tsa-roots.pem and the Rekor
// keys are written by whoever wrote the directory, so a forger can put in
// witnesses and authorities of their own. Each pin set replaces that part
// of the directory's trust for the check; the directory's files are still
// checked against its manifest and anchor record.
type Pins struct {
	// Witnesses are cosignature/v1 verifier keys; when set, the target
	// must be cosigned by Threshold of them, unless witnesses.txt holds
	// exactly this policy (then a shortfall is reported, as the
	// manifest's "missing" says, rather than failing).
	Witnesses []string
	Threshold int
	// TSARoots and RekorKeys, when set, are the only roots the tokens and
	// the only keys the Rekor entries may verify with.
	TSARoots  []*x509.Certificate
	RekorKeys []crypto.PublicKey
	// TSAs, when set in place of TSARoots, pin each TSA's own roots: a
	// token counts only under the roots pinned for its URL.
	TSAs []anchor.TSATrust
}

// Pinned says which trust the caller pinned.
type Pinned struct {
	Witnesses, TSARoots, RekorKeys bool
}

func (p Pins) pinned() Pinned {
	return Pinned{Witnesses: len(p.Witnesses) > 0, TSARoots: len(p.TSARoots) > 0 || len(p.TSAs) > 0, RekorKeys: len(p.RekorKeys) > 0}
}

// policy is the pinned witness policy; no witnesses when none are pinned.
func (p Pins) policy() (log.WitnessPolicy, error) {
	if len(p.Witnesses) == 0 {
		if p.Threshold != 0 {
			return log.WitnessPolicy{}, errors.New("evidence: a pinned witness threshold needs pinned witness keys")
		}
		return log.WitnessPolicy{}, nil
	}
	wp, err := log.NewWitnessPolicy(p.Witnesses, p.Threshold)
	if err != nil {
		return wp, fmt.Errorf("evidence: pinned witnesses: %w", err)
	}
	if wp.Threshold < 1 {
		return wp, errors.New("evidence: a pinned witness threshold must be at least 1")
	}
	return wp, nil
}

// checkPinnedWitnesses applies the pinned policy: the report states it,
// and a directory naming other witnesses fails unless the pinned ones
// cosigned the target.
func (c *checker) checkPinnedWitnesses(cpB []byte, dir log.WitnessPolicy, haveDir bool) {
	p := c.pinPolicy
	_, cos, err := p.Cosigners(cpB, c.v)
	if err != nil {
		c.bad(CheckpointFile, "%v", err)
		return
	}
	c.rep.Witnesses, c.rep.Threshold, c.rep.Cosigners = len(p.Witnesses), p.Threshold, cos
	if len(cos) >= p.Threshold || (haveDir && samePolicy(dir, p)) {
		return
	}
	part, theirs := CheckpointFile, "names no witnesses"
	if haveDir {
		part, theirs = WitnessesFile, "names other witnesses than you pinned"
	}
	c.bad(part, "the checkpoint is cosigned by %d of the %d witnesses you pinned, fewer than the %d you require; the directory %s",
		len(cos), len(p.Witnesses), p.Threshold, theirs)
}

// samePolicy reports whether two policies have the same threshold and the
// same witness keys, compared whole.
func samePolicy(a, b log.WitnessPolicy) bool {
	keys := func(p log.WitnessPolicy) []string {
		var out []string
		for _, w := range p.Witnesses {
			out = append(out, fmt.Sprint(w))
		}
		slices.Sort(out)
		return out
	}
	return a.Threshold == b.Threshold && slices.Equal(keys(a), keys(b))
}

// anchorTrust is the trust an anchor record is verified with: the
// record's own roots and keys where nothing is pinned.
func (c *checker) anchorTrust(r *anchor.Record) *anchor.Trust {
	t := anchor.TrustFromRecord(r)
	if c.pins.pinned().TSARoots {
		t.TSARoots, t.TSAs = c.pins.TSARoots, c.pins.TSAs
	}
	if len(c.pins.RekorKeys) > 0 {
		t.RekorKeys = c.pins.RekorKeys
	}
	return t
}

// blamePinned names the token or Rekor file of each anchor problem that
// pinned trust caused.
func (c *checker) blamePinned(err error) {
	var ve *log.ProblemsError
	if !errors.As(err, &ve) {
		return
	}
	for _, p := range ve.Problems {
		var i int
		switch {
		case c.pins.pinned().TSARoots && scan(p.Part, "timestamp %d", &i):
			c.bad(fmt.Sprintf("%s/%d.tst", TimestampsDir, i), "does not verify against the TSA roots you pinned: %s", p.Msg)
		case c.pins.pinned().RekorKeys && scan(p.Part, anchor.KindRekorV1+" %d", &i):
			c.bad(fmt.Sprintf("%s/%d.json", RekorDir, i), "does not verify against the Rekor keys you pinned: %s", p.Msg)
		}
	}
}

func scan(s, format string, i *int) bool {
	n, _ := fmt.Sscanf(s, format, i)
	return n == 1
}

// TrustString says, one line each, which trust the caller pinned and
// which came from the directory.
func (r *Report) TrustString() string {
	line := func(what string, pinned, present bool) string {
		switch {
		case pinned:
			return "  " + what + ": pinned by you\n"
		case present:
			return "  " + what + ": from the directory (not pinned)\n"
		}
		return "  " + what + ": none in the directory (not pinned)\n"
	}
	var b strings.Builder
	b.WriteString(line("witness keys", r.Pinned.Witnesses, r.Witnesses > 0))
	b.WriteString(line("TSA roots", r.Pinned.TSARoots, len(r.Timestamps) > 0))
	b.WriteString(line("Rekor keys", r.Pinned.RekorKeys, len(r.Rekor) > 0))
	return b.String()
}
