package evidence

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
)

// target is the checkpoint an evidence centres on.
type target struct {
	note     []byte
	cp       log.Checkpoint
	record   *anchor.Stored // nil when not anchored
	cosigned bool
	// skipped, when no record is the target, is the smallest record
	// covering the entry that was left out because an authority dates it
	// before an entry it covers; the directory carries it to say why.
	skipped *skippedAnchor
}

// skippedAnchor is a record left out for its times, and the entry with
// the latest time among those its checkpoint covers.
type skippedAnchor struct {
	st     *anchor.Stored
	newest anchor.EntryTime
	probs  []log.Problem // what CheckCovered said
}

// skippedWhy is the manifest's "missing" line for an evidence with no
// anchor because the smallest record covering the entry, of size size,
// was skipped for probs; [Verify] derives the same from the files.
func skippedWhy(size uint64, probs []log.Problem) string {
	parts := make([]string, len(probs))
	for i, p := range probs {
		parts[i] = p.String()
	}
	return fmt.Sprintf("no anchor whose times hold covers the entry: the smallest anchor covering it, of size %d (%s), was left out: %s",
		size, SkippedAnchorFile, strings.Join(parts, "; "))
}

// skippedWhy is t's line for [missing], "" if no record was skipped.
func (t *target) skippedWhy() string {
	if t.skipped == nil {
		return ""
	}
	return skippedWhy(t.skipped.st.Record.Size, t.skipped.probs)
}

// putSkipped writes the record skipped for its times, the entry it dates
// before and that entry's inclusion proof in the record's checkpoint.
func (w *writer) putSkipped(ctx context.Context, src Source, sk *skippedAnchor) error {
	i, r := sk.newest.Index, sk.st.Record
	es, err := src.Entries(ctx, i, i+1)
	if err != nil {
		return fmt.Errorf("evidence: reading entry %d: %w", i, err)
	}
	rc, err := log.ProveReceipt(ctx, src, i, r.Size, log.LeafHash(es[0]), []byte(r.Checkpoint))
	if err != nil {
		return err
	}
	w.put(SkippedAnchorFile, sk.st.Bytes)
	w.put(SkippedEntryFile, es[0])
	w.put(SkippedProofFile, []byte(rc.String()))
	return nil
}

// chooser holds one run of chooseTarget.
type chooser struct {
	o     Options
	v     note.Verifier
	p     log.WitnessPolicy
	key   crypto.PublicKey // the anchoring key, parsed when a record needs it
	times *anchor.CoveredTimes
	// rekor compares the Rekor checkpoints of the records so far, by
	// size, as provlog audit does; forked holds what it found wrong with
	// each, by name.
	rekor  anchor.RekorHistory
	forked map[string][]log.Problem
}

// chooseTarget picks the smallest anchored checkpoint covering the entry
// that the witness policy accepts; else the smallest anchored one; else a
// cosigned checkpoint covering it; else the log's latest. A record is a
// target only if [Verify] would accept it there: it verifies (against
// its own roots and keys, and the configured ones when o.Trust is set),
// its checkpoint's cosignatures by the policy's witnesses verify, and no
// authority dates it before an entry it covers ([anchor.Verified.CheckCovered],
// against the latest time among all those entries, as provlog audit
// checks), and its Rekor checkpoints show no fork against those of the
// records before it ([anchor.RekorHistory]). Each record left out is
// passed to o.Skipped with why.
func chooseTarget(ctx context.Context, o Options, v note.Verifier, p log.WitnessPolicy) (*target, error) {
	recs := slices.Clone(o.Records)
	slices.SortStableFunc(recs, func(a, b *anchor.Stored) int { return cmpSize(a, b) })
	ch := &chooser{o: o, v: v, p: p, times: anchor.NewCoveredTimes(o.Source), forked: map[string][]log.Problem{}}
	witnessed := len(p.Witnesses) > 0
	var first *target
	var skipped *skippedAnchor
	for _, st := range recs {
		if st.Record == nil {
			continue // a record that does not parse is no target; audit reports it
		}
		if err := ch.compareRekor(ctx, st); err != nil {
			return nil, err
		}
		if st.Record.Size <= o.Index {
			continue
		}
		msg := []byte(st.Record.Checkpoint)
		cp, cos, err := p.Cosigners(msg, v)
		if err != nil {
			ch.skip(st, err)
			continue
		}
		cosigned := witnessed && len(cos) >= p.Threshold
		if first != nil && !cosigned {
			continue // first is better than this one
		}
		ok, sk, err := ch.check(ctx, st)
		if err != nil {
			return nil, err
		}
		if skipped == nil {
			skipped = sk
		}
		if !ok {
			continue
		}
		t := &target{note: msg, cp: cp, record: st, cosigned: cosigned}
		if cosigned || !witnessed {
			return t, nil
		}
		if first == nil {
			first = t
		}
	}
	if first != nil {
		return first, nil
	}
	t, err := unanchoredTarget(o, v, p)
	if err != nil {
		return nil, err
	}
	t.skipped = skipped
	return t, nil
}

// check says whether st may be the target; when not, why goes to
// o.Skipped, and sk is st if its times are why. The error is one of
// reading the log.
func (ch *chooser) check(ctx context.Context, st *anchor.Stored) (ok bool, sk *skippedAnchor, err error) {
	if err := ch.parseKey(); err != nil {
		return false, nil, err
	}
	r := st.Record
	if b, err := r.Marshal(); err != nil || !bytes.Equal(b, st.Bytes) {
		ch.skip(st, errors.New("is not in the record's canonical form"))
		return false, nil, nil
	}
	ver, err := anchor.Verify(ctx, r, ch.v, ch.key, nil)
	if err != nil {
		ch.skip(st, err)
		return false, nil, nil
	}
	if ch.o.Trust != nil {
		if _, err := anchor.Verify(ctx, r, ch.v, ch.key, ch.o.Trust); err != nil {
			ch.skip(st, fmt.Errorf("does not verify under the configured trust: %w", err))
			return false, nil, nil
		}
	}
	if probs := ch.forked[st.Name]; len(probs) > 0 {
		ch.skip(st, &log.ProblemsError{What: "anchor record", Problems: probs})
		return false, nil, nil
	}
	if ch.o.testingOnlySkipTimes {
		return true, nil, nil
	}
	newest, err := ch.times.Newest(ctx, r.Size)
	if err != nil {
		return false, nil, fmt.Errorf("evidence: checking anchor record %s against the entries it covers: %w", st.Name, err)
	}
	if probs := ver.CheckCovered(newest); len(probs) > 0 {
		ch.skip(st, &log.ProblemsError{What: "anchor record", Problems: probs})
		return false, &skippedAnchor{st: st, newest: newest, probs: probs}, nil
	}
	return true, nil, nil
}

// parseKey parses the anchoring key, once.
func (ch *chooser) parseKey() error {
	if ch.key != nil {
		return nil
	}
	var err error
	if ch.key, err = x509.ParsePKIXPublicKey(ch.o.AnchorKey); err != nil {
		return fmt.Errorf("evidence: anchoring key: %w", err)
	}
	return nil
}

// compareRekor compares the Rekor checkpoints of st, when it holds a
// Rekor entry and verifies, with those of the records before it (call it
// on every record by size, those below the entry too), as provlog audit
// does: a record that shows Rekor forked is no target, though it verifies
// alone, which is all the directory's check can see of it.
func (ch *chooser) compareRekor(ctx context.Context, st *anchor.Stored) error {
	if !slices.ContainsFunc(st.Record.Tlogs, func(t *anchor.Tlog) bool { return t.RekorV1 != nil }) {
		return nil
	}
	if err := ch.parseKey(); err != nil {
		return err
	}
	if _, err := anchor.Verify(ctx, st.Record, ch.v, ch.key, nil); err != nil {
		return nil // no witness of what Rekor showed; the audit reports it
	}
	if probs := ch.rekor.Add(st.Name, st.Record); len(probs) > 0 {
		ch.forked[st.Name] = probs
	}
	return nil
}

func (ch *chooser) skip(st *anchor.Stored, why error) {
	if ch.o.Skipped != nil {
		ch.o.Skipped(st.Name, why)
	}
}

// unanchoredTarget picks a cosigned checkpoint covering the entry, else
// the log's latest.
func unanchoredTarget(o Options, v note.Verifier, p log.WitnessPolicy) (*target, error) {
	for _, msg := range o.Cosigned {
		cp, _, err := log.OpenWitnessedCheckpoint(msg, v, p)
		if err == nil && cp.Size > o.Index {
			return &target{note: msg, cp: cp, cosigned: len(p.Witnesses) > 0}, nil
		}
	}
	cp, cos, err := p.Cosigners(o.Latest, v)
	if err != nil {
		return nil, fmt.Errorf("evidence: the log's latest checkpoint: %w", err)
	}
	if cp.Size <= o.Index {
		return nil, fmt.Errorf("evidence: entry %d is not in the log of size %d", o.Index, cp.Size)
	}
	return &target{note: o.Latest, cp: cp, cosigned: len(p.Witnesses) > 0 && len(cos) >= p.Threshold}, nil
}

func cmpSize(a, b *anchor.Stored) int {
	var x, y uint64
	if a.Record != nil {
		x = a.Record.Size
	}
	if b.Record != nil {
		y = b.Record.Size
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
