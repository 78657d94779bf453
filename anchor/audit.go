package anchor

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// AuditLog is the log an audit compares the records with: its entries and
// the signed checkpoint stored for a size. A log.Storage is one.
type AuditLog interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
	Checkpoint(ctx context.Context, size uint64) ([]byte, error)
}

// AuditOptions say what an audit trusts and what it compares with.
type AuditOptions struct {
	// Verifier is the log's note verifier. Required.
	Verifier note.Verifier
	// AnchorKey is the log's anchoring public key (the genesis entry's
	// anchor_key, or <data>/anchor.pub). nil: each record's own.
	AnchorKey crypto.PublicKey
	// Trust holds the configured TSA roots and Rekor keys. nil: each
	// record's own (see [TrustFromRecord]), which the report flags.
	Trust *Trust
	// Log, if not nil, is the audited log and Size its audited size (from
	// log.Audit): every record's checkpoint must be the log's at its
	// size, and every record must match the anchor entry that names it.
	Log  AuditLog
	Size uint64
}

// AuditReport says what an audit of the anchors checked.
type AuditReport struct {
	Records    int // record files
	Verified   int // records that passed every check
	Timestamps int // RFC 3161 tokens verified
	Tlogs      int // transparency-log entries verified
	// Entries counts the anchor entries found in the log.
	Entries int
	// FirstSize and LastSize are the smallest and largest anchored sizes;
	// LastTime the newest TSA (or Rekor) time vouching for LastSize.
	FirstSize, LastSize uint64
	LastTime            time.Time
	// SelfTrusted is true when no Trust was given and each record was
	// checked against the roots and keys it stores.
	SelfTrusted bool
	// Unlogged names the newest record when the log does not hold its
	// anchor entry: the sidecar stopped between storing the record and
	// appending its entry, and appends it when it starts again. (An older
	// record without its entry is a problem.)
	Unlogged []string
	// Problems are what failed; a record's are named "NAME: part".
	Problems []log.Problem
}

// AuditAll verifies every anchor record in dir offline, with no network:
// each passes [Verify]; consecutive records are linked by their
// consistency proofs (each record's previous checkpoint is the record
// before it); and, given the log, each anchored checkpoint is the one the
// log stored for that size and each anchor entry in the log names a
// stored record whose bytes, token and entry hashes are the ones it
// recorded. Every problem is collected; the error is a
// *[log.ProblemsError] when there is any, each problem of a record named
// "NAME: part" (NAME its file name) and each of an anchor entry "anchor
// entry N".
func AuditAll(ctx context.Context, dir string, opts AuditOptions) (*AuditReport, error) {
	if opts.Verifier == nil {
		return nil, errors.New("audit: the log's verifier is required")
	}
	store := &Store{dir: dir}
	list, err := store.List()
	if errors.Is(err, fs.ErrNotExist) {
		list, err = nil, nil // no records: the log's anchor entries may still name some
	}
	if err != nil {
		return nil, err
	}
	rep := &AuditReport{Records: len(list), SelfTrusted: opts.Trust == nil}
	add := func(rec, part string, err error) {
		rep.Problems = append(rep.Problems, log.ProblemOf(rec+": "+part, err))
	}
	byName := map[string]*Stored{}
	var prev *Record
	for _, st := range list {
		byName[st.Name] = st
		if st.Err != nil {
			add(st.Name, "record", st.Err)
			continue
		}
		r := st.Record
		ok := true
		v, err := Verify(ctx, r, opts.Verifier, opts.AnchorKey, opts.Trust)
		if err != nil {
			ok = false
			var pe *log.ProblemsError
			if errors.As(err, &pe) {
				for _, p := range pe.Problems {
					rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + p.Part, Msg: p.Msg})
				}
			} else {
				add(st.Name, "record", err)
			}
		}
		if prev != nil {
			switch p := r.Previous; {
			case p == nil:
				ok = false
				add(st.Name, "consistency proof", fmt.Errorf("missing: the record before anchors size %d", prev.Size))
			case p.Size != prev.Size || !bytes.Equal(p.Root, prev.Root):
				ok = false
				add(st.Name, "consistency proof", fmt.Errorf("starts from size %d root %x, but the record before anchors size %d root %x", p.Size, p.Root, prev.Size, prev.Root))
			}
		}
		if opts.Log != nil {
			if err := againstLog(ctx, opts, r); err != nil {
				ok = false
				add(st.Name, "log", err)
			}
		}
		if ok {
			rep.count(r, v)
		}
		prev = r
	}
	if opts.Log != nil {
		if err := auditEntries(ctx, opts, list, byName, rep); err != nil {
			return rep, err
		}
	}
	if len(rep.Problems) > 0 {
		return rep, &log.ProblemsError{What: "anchors", Problems: rep.Problems}
	}
	return rep, nil
}

// againstLog returns what is wrong with r in the light of the audited
// log: the log must hold a checkpoint of the anchored size with the
// anchored root.
func againstLog(ctx context.Context, opts AuditOptions, r *Record) error {
	if r.Size > opts.Size {
		return fmt.Errorf("anchors size %d, beyond the audited log's size %d", r.Size, opts.Size)
	}
	msg, err := opts.Log.Checkpoint(ctx, r.Size)
	if err != nil {
		return fmt.Errorf("the log has no checkpoint of the anchored size %d: %w", r.Size, err)
	}
	c, _, err := log.OpenCheckpoint(msg, opts.Verifier)
	if err != nil {
		return fmt.Errorf("the log's checkpoint of size %d: %w", r.Size, err)
	}
	if !bytes.Equal(c.Hash, r.Root) {
		return fmt.Errorf("the log's root at size %d is %x, the anchored root %x: the log was rewritten after it was anchored", r.Size, c.Hash, r.Root)
	}
	return nil
}

// count adds r, verified as v, to the report's tallies.
func (rep *AuditReport) count(r *Record, v *Verified) {
	rep.Verified++
	rep.Timestamps += len(v.Times)
	rep.Tlogs += len(v.RekorIndexes)
	if rep.FirstSize == 0 {
		rep.FirstSize = r.Size
	}
	rep.LastSize = r.Size
	rep.LastTime = time.Time{}
	for _, t := range v.Times {
		if t.After(rep.LastTime) {
			rep.LastTime = t
		}
	}
	for _, tl := range r.Tlogs {
		if tl.RekorV1 != nil && tl.RekorV1.Time().After(rep.LastTime) {
			rep.LastTime = tl.RekorV1.Time()
		}
	}
}

// auditEntries compares the anchor entries in the log with the records.
// It reads the whole log: an entry naming a record that is gone is what
// shows the records deleted, the oldest ones included (it read from the
// oldest record left, and nothing at all when none was left, so a
// deleted prefix of the records passed).
func auditEntries(ctx context.Context, opts AuditOptions, list []*Stored, byName map[string]*Stored, rep *AuditReport) error {
	if opts.Size == 0 {
		return nil
	}
	logged := map[string]bool{}
	const chunk = 4096
	for start := uint64(0); start < opts.Size; start += chunk {
		end := min(opts.Size, start+chunk)
		entries, err := opts.Log.Entries(ctx, start, end)
		if err != nil {
			return fmt.Errorf("reading log entries: %w", err)
		}
		for i, b := range entries {
			if !bytes.Contains(b, []byte(`"kind":"anchor"`)) {
				continue
			}
			idx := start + uint64(i)
			e, err := log.ParseEntry(b)
			if err != nil || e.Kind != log.KindAnchor {
				continue
			}
			rep.Entries++
			where := fmt.Sprintf("anchor entry %d", idx)
			f, err := log.ParseAnchorEntry(e)
			if err != nil {
				rep.Problems = append(rep.Problems, log.ProblemOf(where, err))
				continue
			}
			st := byName[f.Record]
			if st == nil {
				rep.Problems = append(rep.Problems, log.Problem{Part: where, Msg: fmt.Sprintf("names record %s, which is not stored", f.Record)})
				continue
			}
			if idx < f.Size {
				rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + where, Msg: fmt.Sprintf("is at index %d, inside the checkpoint of size %d it claims to anchor", idx, f.Size)})
			}
			if p := compareEntry(f, st); p != nil {
				rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + p.Part, Msg: fmt.Sprintf("%s (anchor entry %d)", p.Msg, idx)})
			}
			logged[f.Record] = true
		}
	}
	for i, st := range list {
		switch {
		case logged[st.Name]:
		case i == len(list)-1:
			rep.Unlogged = append(rep.Unlogged, st.Name)
		default:
			// Only the newest record can be waiting for its entry: the
			// sidecar appends a missing one before it anchors again.
			rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": anchor entry", Msg: "the log holds no anchor entry for this record, yet later records exist"})
		}
	}
	return nil
}
