package evidence

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// checkAnchor checks anchor.json against the target, the anchoring key
// and the bundled trust roots (or the pinned ones), and the token and
// Rekor files cut from it.
func (c *checker) checkAnchor(anchorKey crypto.PublicKey) {
	b := c.get(AnchorFile, false)
	if b == nil {
		return
	}
	c.rep.Manifest.Anchored = true
	r := c.record(AnchorFile, b)
	if r == nil {
		return
	}
	if r.Checkpoint != string(c.get(CheckpointFile, true)) {
		c.bad(AnchorFile, "anchors another checkpoint than %s", CheckpointFile)
	}
	// The trust files hold exactly the roots and keys the record was
	// verified with when it was made (its chains' roots, its Rekor keys),
	// for tools such as openssl -CAfile; they must be those bytes.
	trust := anchor.TrustFromRecord(r)
	roots, keys, err := trustPEM(trust)
	if err != nil {
		c.bad(AnchorFile, "%v", err)
	}
	if !bytes.Equal(c.get(TSARootsFile, true), roots) {
		c.bad(TSARootsFile, "is not the roots of the chains in %s", AnchorFile)
	}
	if !bytes.Equal(c.get(RekorKeysFile, true), keys) {
		c.bad(RekorKeysFile, "is not the Rekor keys in %s", AnchorFile)
	}
	ver, err := anchor.Verify(c.ctx, r, c.v, anchorKey, c.anchorTrust(r))
	if err != nil {
		c.bad(AnchorFile, "%v", err)
		c.blamePinned(err)
	}
	c.anchored = ver
	for i, ts := range r.Timestamps {
		tn, pn := fmt.Sprintf("%s/%d.tst", TimestampsDir, i), fmt.Sprintf("%s/%d.pem", TimestampsDir, i)
		if !bytes.Equal(c.get(tn, true), ts.Token) {
			c.bad(tn, "is not timestamp %d of %s", i, AnchorFile)
		}
		if !bytes.Equal(c.get(pn, true), certsPEM(ts.Chain)) {
			c.bad(pn, "is not the chain of timestamp %d of %s", i, AnchorFile)
		}
		if ver != nil && i < len(ver.Times) {
			c.rep.Timestamps = append(c.rep.Timestamps, Timestamp{TSA: signerName(ts.Chain), URL: ts.URL, Time: ver.Times[i]})
		}
	}
	for i, tl := range r.Tlogs {
		if tl.RekorV1 == nil {
			continue
		}
		jn, pn := fmt.Sprintf("%s/%d.json", RekorDir, i), fmt.Sprintf("%s/%d.pub", RekorDir, i)
		if !bytes.Equal(c.get(jn, true), tl.RekorV1.Entry) {
			c.bad(jn, "is not Rekor entry %d of %s", i, AnchorFile)
		}
		if !bytes.Equal(c.get(pn, true), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: tl.RekorV1.PublicKey})) {
			c.bad(pn, "is not the Rekor key of entry %d of %s", i, AnchorFile)
		}
		if ver != nil {
			c.rep.Rekor = append(c.rep.Rekor, RekorEntry{URL: tl.RekorV1.URL, Index: tl.RekorV1.LogIndex,
				IntegratedTime: time.Unix(tl.RekorV1.IntegratedTime, 0).UTC()})
		}
	}
}

// checkAnchorTimes requires the time of each of anchor.json's
// authorities to be no earlier, beyond anchor.MaxClockSkew, than the time
// of any entry proven here in the anchored checkpoint: the report tells
// its reader that the entry was in the log by the authority's time. The
// newest of these entries is the one to compare (their times need not
// grow with their index).
func (c *checker) checkAnchorTimes() {
	if c.anchored == nil || len(c.covered) == 0 {
		return
	}
	newest := c.covered[0]
	for _, e := range c.covered[1:] {
		if e.Time.After(newest.Time) {
			newest = e
		}
	}
	for _, p := range c.anchored.CheckCovered(newest.EntryTime) {
		c.bad(AnchorFile, "%s: %s (%s)", p.Part, p.Msg, newest.file)
	}
}

// checkSkipped checks the skipped/ files, which say why an evidence has
// no anchor though one covers the entry: the smallest record covering it
// dates the log before an entry it covers. The record must verify (under
// its own roots and keys: it is not vouched for, only shown), the entry
// must be proven in its checkpoint, and an authority's time must be
// earlier than the entry's by more than anchor.MaxClockSkew; then the
// manifest must say so (see skippedWhy).
func (c *checker) checkSkipped(anchorKey crypto.PublicKey) {
	b := c.get(SkippedAnchorFile, false)
	if b == nil {
		return
	}
	if c.files[AnchorFile] != nil {
		c.bad(SkippedAnchorFile, "is there though %s anchors the checkpoint: it says why there is no anchor", AnchorFile)
	}
	r := c.record(SkippedAnchorFile, b)
	if r == nil {
		return
	}
	if m := c.rep.Manifest; r.Size <= m.Index {
		c.bad(SkippedAnchorFile, "anchors size %d, which does not cover entry %d", r.Size, m.Index)
	}
	ver, err := anchor.Verify(c.ctx, r, c.v, anchorKey, nil)
	if err != nil {
		c.bad(SkippedAnchorFile, "%v", err)
	}
	e, eb, rc := c.entryAndProof(SkippedEntryFile, SkippedProofFile)
	if e == nil {
		return
	}
	if string(rc.Checkpoint) != r.Checkpoint {
		c.bad(SkippedProofFile, "carries another checkpoint than %s anchors", SkippedAnchorFile)
		return
	}
	if _, err := rc.Verify(log.LeafHash(eb), c.v); err != nil {
		c.bad(SkippedProofFile, "does not prove %s in the checkpoint of %s: %v", SkippedEntryFile, SkippedAnchorFile, err)
		c.blameEntry(SkippedEntryFile, eb, rc)
		return
	}
	if ver == nil {
		return
	}
	probs := ver.CheckCovered(anchor.EntryTime{Index: rc.Index, Time: e.Time})
	if len(probs) == 0 {
		c.bad(SkippedAnchorFile, "no authority of it is dated before %s (entry %d), which is no reason to leave it out", SkippedEntryFile, rc.Index)
		return
	}
	c.skippedWhy = skippedWhy(r.Size, probs)
}

// record parses the anchor record b, the file name, which must be in its
// canonical form; nil if it does not parse.
func (c *checker) record(name string, b []byte) *anchor.Record {
	r, err := anchor.ParseRecord(b)
	if err != nil {
		c.bad(name, "%v", err)
		return nil
	}
	if again, err := r.Marshal(); err != nil || !bytes.Equal(again, b) {
		c.bad(name, "is not in the record's canonical form")
	}
	return r
}

// signerName is the subject of a chain's first certificate.
func signerName(chain [][]byte) string {
	if len(chain) == 0 {
		return "an unnamed TSA"
	}
	cert, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return "an unnamed TSA"
	}
	if cert.Subject.CommonName != "" {
		return cert.Subject.CommonName
	}
	return cert.Subject.String()
}
