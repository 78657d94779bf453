package anchor

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor/rfc3161"
	"github.com/provlog/provlog/log"
)

// Trust is what a verifier trusts beside the log's own keys: the roots of
// the TSAs and the public keys of the Rekor logs.
//
// TSAs, when set, pins each TSA: a token is checked against the roots
// (and policy) of the TSA whose URL the record stores it under, so one
// TSA's root never vouches for a token said to be another's, and a token
// under a URL none of them has is refused. Only when TSAs is empty are
// tokens checked against TSARoots, pooled (pinned PEM files, which name
// no TSA, and [TrustFromRecord]).
type Trust struct {
	TSARoots  []*x509.Certificate
	TSAs      []TSATrust
	RekorKeys []crypto.PublicKey
}

// A TSATrust is one pinned TSA: its URL as records store it (without
// credentials), its roots, and the policy its tokens must carry, if any.
type TSATrust struct {
	URL    string
	Roots  []*x509.Certificate
	Policy asn1.ObjectIdentifier
}

// tsaOptions returns what a token stored under url is checked with: the
// roots and policy t pins for that TSA, and an accuracy no wider than
// [MaxClockSkew], the precision the anchor's time is used to.
func (t *Trust) tsaOptions(url string) (rfc3161.VerifyOptions, error) {
	o := rfc3161.VerifyOptions{Roots: t.TSARoots, MaxAccuracy: MaxClockSkew}
	if len(t.TSAs) == 0 {
		if len(o.Roots) == 0 {
			return o, errors.New("no trusted TSA roots")
		}
		return o, nil
	}
	for _, a := range t.TSAs {
		if a.URL == url {
			o.Roots, o.Policy = a.Roots, a.Policy
			return o, nil
		}
	}
	return o, fmt.Errorf("%s is not a trusted TSA: no roots are pinned for it (if it was retired, keep it under anchors.tsa with its roots and retired: true, which verifies its old tokens and asks it for no new ones)", log.Printable(url))
}

// TrustFromRecord returns the trust a record itself declares: the root
// of each stored TSA chain and each stored Rekor key. Verifying a record
// against it shows the record is internally consistent, not that the
// authorities are the ones you trust; pin them with a [Trust] from the
// configuration when you can.
func TrustFromRecord(r *Record) *Trust {
	t := &Trust{}
	for _, ts := range r.Timestamps {
		if len(ts.Chain) == 0 {
			continue
		}
		if c, err := x509.ParseCertificate(ts.Chain[len(ts.Chain)-1]); err == nil {
			t.TSARoots = append(t.TSARoots, c)
		}
	}
	for _, tl := range r.Tlogs {
		if tl.RekorV1 == nil {
			continue
		}
		if k, err := x509.ParsePKIXPublicKey(tl.RekorV1.PublicKey); err == nil {
			t.RekorKeys = append(t.RekorKeys, k)
		}
	}
	return t
}

// Verified is what a verified record vouches for.
type Verified struct {
	Size   uint64
	Root   []byte
	Digest []byte
	// Times are the TSAs' times, in record order.
	Times []time.Time
	// RekorIndexes are the Rekor log indexes, in record order.
	RekorIndexes []int64
	// Authorities are the tokens and then the Rekor entries, each with
	// the time it vouches for.
	Authorities []Authority
}

// Verify checks a record offline, with no network:
//
//   - the checkpoint is signed by the log (v) and Origin, Size and Root
//     repeat it; Digest is the SHA-256 of the checkpoint note;
//   - the record's anchoring key is anchorKey (when not nil: pass the key
//     from the log's genesis entry or the data dir);
//   - the consistency proof leads from the previous anchored checkpoint to
//     this one;
//   - every RFC 3161 token passes rfc3161.Token.Check over Digest against
//     the roots and policy trust pins for its TSA (see [Trust]), with an
//     accuracy no wider than [MaxClockSkew], and every Rekor entry passes rekor.Entry.Check for
//     Digest and the anchoring key against trust.RekorKeys; so each binds
//     this checkpoint and this key, not merely some data;
//   - there is at least one of them.
//
// A nil trust means [TrustFromRecord]. Every check runs; the error is a
// *[log.ProblemsError] naming each part that broke: "record",
// "checkpoint", "checkpoint digest", "anchoring key", "consistency
// proof", "timestamp N (URL)", "rekor.v1 N (URL)".
func Verify(ctx context.Context, r *Record, v note.Verifier, anchorKey crypto.PublicKey, trust *Trust) (*Verified, error) {
	var probs []log.Problem
	fail := func(part string, err error) { probs = append(probs, log.ProblemOf(part, err)) }
	if trust == nil {
		trust = TrustFromRecord(r)
	}
	res := &Verified{Size: r.Size, Root: r.Root}

	cp, _, err := log.OpenCheckpoint([]byte(r.Checkpoint), v)
	if err != nil {
		fail("checkpoint", err)
	} else if cp.Origin != r.Origin || cp.Size != r.Size || !bytes.Equal(cp.Hash, r.Root) {
		fail("checkpoint", fmt.Errorf("record says %s size %d root %x, the signed checkpoint says %s size %d root %x",
			r.Origin, r.Size, r.Root, cp.Origin, cp.Size, cp.Hash))
	}
	digest := CheckpointDigest([]byte(r.Checkpoint))
	res.Digest = digest
	if r.Digest != hex.EncodeToString(digest) {
		fail("checkpoint digest", fmt.Errorf("record says %s, the checkpoint's SHA-256 is %x", r.Digest, digest))
	}

	key, err := x509.ParsePKIXPublicKey(r.AnchorKey)
	if err != nil {
		fail("anchoring key", err)
		key = nil
	} else if anchorKey != nil && !sameKey(key, anchorKey) {
		fail("anchoring key", errors.New("the record's anchoring key is not the log's"))
	}
	if anchorKey == nil {
		anchorKey = key
	}

	if p := r.Previous; p != nil {
		if p.Size > r.Size {
			fail("consistency proof", fmt.Errorf("previous size %d is above this size %d", p.Size, r.Size))
		} else if p.Size == 0 {
			fail("consistency proof", errors.New("previous anchored checkpoint has size 0"))
		} else if err := log.VerifyConsistency(p.Size, r.Size, p.Proof, p.Root, r.Root); err != nil {
			fail("consistency proof", fmt.Errorf("from size %d to %d: %w", p.Size, r.Size, err))
		}
	}

	checkAuthorities(ctx, r, digest, anchorKey, trust, res, fail)
	if len(probs) > 0 {
		return nil, &log.ProblemsError{What: "anchor record", Problems: probs}
	}
	return res, nil
}

// checkAuthorities checks what r's authorities vouch for, digest: each
// RFC 3161 token against trust's TSA roots, each Rekor entry for
// anchorKey against trust's Rekor keys, and that there is at least one.
// What they vouch for goes into res; each failure to fail.
func checkAuthorities(ctx context.Context, r *Record, digest []byte, anchorKey crypto.PublicKey, trust *Trust, res *Verified, fail func(part string, err error)) {
	if len(r.Timestamps)+len(r.Tlogs) == 0 {
		fail("record", errors.New("no timestamp and no transparency-log entry"))
	}
	for i, ts := range r.Timestamps {
		part := fmt.Sprintf("timestamp %d (%s)", i, ts.URL)
		opts, err := trust.tsaOptions(ts.URL)
		if err != nil {
			fail(part, err)
			continue
		}
		vt, err := ts.Check(digest, opts)
		if err != nil {
			fail(part, err)
			continue
		}
		res.Times = append(res.Times, vt.Time)
		res.Authorities = append(res.Authorities, Authority{Part: part, Time: vt.Time})
	}
	for i, tl := range r.Tlogs {
		switch {
		case tl.Kind == KindRekorV1 && tl.RekorV1 != nil:
			part := fmt.Sprintf("%s %d (%s)", tl.Kind, i, tl.RekorV1.URL)
			if anchorKey == nil {
				fail(part, errors.New("no anchoring key to check the entry's signature"))
				continue
			}
			if err := tl.RekorV1.Check(ctx, digest, anchorKey, trust.RekorKeys); err != nil {
				fail(part, err)
				continue
			}
			res.RekorIndexes = append(res.RekorIndexes, tl.RekorV1.LogIndex)
			res.Authorities = append(res.Authorities, Authority{Part: part, Time: tl.RekorV1.Time()})
		default:
			fail(fmt.Sprintf("tlog %d", i), fmt.Errorf("unsupported kind %q", tl.Kind))
		}
	}
}

func sameKey(a, b crypto.PublicKey) bool {
	ad, err1 := x509.MarshalPKIXPublicKey(a)
	bd, err2 := x509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && bytes.Equal(ad, bd)
}
