package anchor

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"slices"
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
	// Shared is true when several sidecars, each with its own data dir,
	// write the log (PostgreSQL): an anchor entry whose sidecar member
	// names another sidecar, whose record is not in dir, is counted in
	// [AuditReport.Elsewhere] rather than failed. On a log of one data
	// dir every anchor entry's record must be in dir.
	Shared bool
}

// AuditReport says what an audit of the anchors checked.
type AuditReport struct {
	Records    int // record files
	Verified   int // records that passed every check
	Timestamps int // RFC 3161 tokens verified
	Tlogs      int // transparency-log entries verified
	// Entries counts the anchor entries found in the log.
	Entries int
	// Elsewhere counts the anchor entries of a shared log made by other
	// sidecars, whose records are in their data dirs, not this one: only
	// their form and place in the log were checked here. An entry of this
	// data dir's sidecar (its sidecar.id, or the sidecar member of an
	// entry whose record is here) whose record is missing is a problem.
	Elsewhere int
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
	// RekorUnlinked names the records whose Rekor entry keeps no
	// consistency proof from the Rekor checkpoint of the record before,
	// which holds one of the same tree (made before records kept it, or
	// Rekor did not give it at upload), or whose entry is of a new tree
	// of that Rekor, which nothing links to the old.
	// Only checkpoints of one size are compared for them.
	RekorUnlinked []string
	// Problems are what failed; a record's are named "NAME: part".
	Problems []log.Problem
}

// AuditAll verifies every anchor record in dir offline, with no network:
// each passes [Verify]; consecutive records are linked by their
// consistency proofs (each record's previous checkpoint is the record
// before it); and, given the log, each anchored checkpoint is the one the
// log stored for that size, each anchor entry in the log names a stored
// record whose bytes, token and entry hashes are the ones it recorded,
// and no authority's time is earlier, by more than [MaxClockSkew], than
// the time of an entry the anchored checkpoint covers (see
// [Verified.CheckCovered]). Every problem is collected; the error is a
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
	checked := make([]*audited, 0, len(list))
	var prev *Record
	for _, st := range list {
		byName[st.Name] = st
		if st.Err != nil {
			add(st.Name, "record", st.Err)
			continue
		}
		a := auditRecord(ctx, opts, st, prev, rep)
		checked = append(checked, a)
		prev = st.Record
	}
	rekorForks(checked, rep)
	if opts.Log != nil {
		own, err := ReadSidecar(dir)
		if err != nil {
			rep.Problems = append(rep.Problems, log.ProblemOf(SidecarFile, err))
		}
		if err := auditEntries(ctx, opts, own, list, byName, checked, rep); err != nil {
			return rep, err
		}
	}
	for _, a := range checked {
		if a.ok {
			rep.count(a.st.Record, a.v)
		}
	}
	if len(rep.Problems) > 0 {
		return rep, &log.ProblemsError{What: "anchors", Problems: rep.Problems}
	}
	return rep, nil
}

// rekorForks runs the [rekorHistory] of the records whose entries
// verified; each problem fails the later record.
func rekorForks(checked []*audited, rep *AuditReport) {
	var h rekorHistory
	for _, a := range checked {
		if a.v == nil {
			continue
		}
		if probs := h.add(a.st.Name, a.st.Record); len(probs) > 0 {
			a.ok = false
			rep.Problems = append(rep.Problems, probs...)
		}
	}
	rep.RekorUnlinked = h.unlinked
}

// audited is a record as [AuditAll] found it: ok if it passed every
// check so far, and what it vouches for if [Verify] passed.
type audited struct {
	st *Stored
	v  *Verified
	ok bool
}

// auditRecord checks one parsed record on its own, against the record
// before it (prev, nil for the first) and, given the log, against the
// log's checkpoint of its size; problems go into rep.
func auditRecord(ctx context.Context, opts AuditOptions, st *Stored, prev *Record, rep *AuditReport) *audited {
	add := func(part string, err error) {
		rep.Problems = append(rep.Problems, log.ProblemOf(st.Name+": "+part, err))
	}
	r := st.Record
	a := &audited{st: st, ok: true}
	v, err := Verify(ctx, r, opts.Verifier, opts.AnchorKey, opts.Trust)
	a.v = v
	if err != nil {
		a.ok = false
		var pe *log.ProblemsError
		if errors.As(err, &pe) {
			for _, p := range pe.Problems {
				rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + p.Part, Msg: p.Msg})
			}
		} else {
			add("record", err)
		}
	}
	if prev != nil {
		switch p := r.Previous; {
		case p == nil:
			a.ok = false
			add("consistency proof", fmt.Errorf("missing: the record before anchors size %d", prev.Size))
		case p.Size != prev.Size || !bytes.Equal(p.Root, prev.Root):
			a.ok = false
			add("consistency proof", fmt.Errorf("starts from size %d root %x, but the record before anchors size %d root %x", p.Size, p.Root, prev.Size, prev.Root))
		}
	}
	if opts.Log != nil {
		if err := againstLog(ctx, opts, r); err != nil {
			a.ok = false
			add("log", err)
		}
	}
	return a
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

// auditEntries reads the whole log once: it compares the anchor entries
// with the records, and each verified record's authorities' times with
// the times of the entries its checkpoint covers. Reading the whole log
// is what shows records deleted, the oldest ones included (it read from
// the oldest record left, and nothing at all when none was left, so a
// deleted prefix of the records passed).
func auditEntries(ctx context.Context, opts AuditOptions, own string, list []*Stored, byName map[string]*Stored, checked []*audited, rep *AuditReport) error {
	if opts.Size == 0 {
		return nil
	}
	p := &entryPass{byName: byName, byHash: make(map[string]*Stored, len(list)), rep: rep, logged: map[string]bool{},
		shared: opts.Shared, mine: map[string]bool{}}
	if own != "" {
		p.mine[own] = true
	}
	for _, st := range list {
		p.byHash[st.SHA256] = st
	}
	// The records whose authorities verified, by the size they anchor:
	// each is checked against the entries below its size when the pass
	// reaches that size. (Sizes beyond the log's failed againstLog.)
	for _, a := range checked {
		if a.v != nil && a.st.Record.Size > 0 && a.st.Record.Size <= opts.Size {
			p.covers = append(p.covers, a)
		}
	}
	slices.SortStableFunc(p.covers, func(x, y *audited) int { return cmp.Compare(x.st.Record.Size, y.st.Record.Size) })
	const chunk = 4096
	for start := uint64(0); start < opts.Size; start += chunk {
		end := min(opts.Size, start+chunk)
		entries, err := opts.Log.Entries(ctx, start, end)
		if err != nil {
			return fmt.Errorf("reading log entries: %w", err)
		}
		for i, b := range entries {
			idx := start + uint64(i)
			p.checkCovers(idx)
			p.noteTime(idx, b)
			if bytes.Contains(b, []byte(`"kind":"anchor"`)) {
				p.anchorEntry(idx, b)
			}
		}
	}
	p.checkCovers(opts.Size)
	p.unreadable.report(rep)
	p.settleAway()
	for i, st := range list {
		switch {
		case p.logged[st.Name]:
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

// entryPass is the state of auditEntries' one pass over the log.
type entryPass struct {
	// byHash finds the record an anchor entry commits to; byName the
	// record of the name it gives when none has its SHA-256, to say
	// what changed.
	byHash, byName map[string]*Stored
	rep            *AuditReport
	logged         map[string]bool // records an anchor entry names
	// shared is AuditOptions.Shared; mine holds this data dir's sidecar
	// ids; away the anchor entries naming a sidecar whose records are
	// not here, which settleAway holds to mine once the pass is over.
	shared bool
	mine   map[string]bool
	away   []awayEntry
	// covers are the records to check against the entries' times, by
	// size; next is the first not checked yet.
	covers []*audited
	next   int
	// newest is the latest "time" of the entries read so far.
	newest     newestTime
	badTime    bool // newest is not a time, which is reported
	unreadable unreadable
}

// noteTime keeps entry idx's time if it is the latest so far.
func (p *entryPass) noteTime(idx uint64, b []byte) {
	if !p.newest.note(idx, b) {
		p.unreadable.add(idx, b)
	}
}

// checkCovers checks the records of size idx, the entries below idx
// having all been read, against the latest of their times.
func (p *entryPass) checkCovers(idx uint64) {
	for ; p.next < len(p.covers) && p.covers[p.next].st.Record.Size <= idx; p.next++ {
		a := p.covers[p.next]
		if !p.newest.seen {
			continue // no entry's time could be read: unreadable reports it
		}
		newest, err := p.newest.get()
		if err != nil {
			if !p.badTime {
				p.badTime = true
				p.rep.Problems = append(p.rep.Problems, log.ProblemOf(fmt.Sprintf("entry %d", newest.Index), err))
			}
			a.ok = false
			continue
		}
		for _, pr := range a.v.CheckCovered(newest) {
			p.rep.Problems = append(p.rep.Problems, log.Problem{Part: a.st.Name + ": " + pr.Part, Msg: pr.Msg})
			a.ok = false
		}
	}
}

// anchorEntry compares anchor entry idx, b, with the record it names.
func (p *entryPass) anchorEntry(idx uint64, b []byte) {
	rep := p.rep
	e, err := log.ParseEntry(b)
	if err != nil || e.Kind != log.KindAnchor {
		return
	}
	rep.Entries++
	where := fmt.Sprintf("anchor entry %d", idx)
	f, err := log.ParseAnchorEntry(e)
	if err != nil {
		rep.Problems = append(rep.Problems, log.ProblemOf(where, err))
		return
	}
	// The SHA-256 decides, not the name: two sidecars of a shared log
	// each stored a record of one size under one name before names held
	// a hash.
	st := p.byHash[f.RecordHash]
	if st == nil {
		st = p.byName[f.Record]
	}
	if st == nil && p.shared && f.Sidecar != "" {
		// Another sidecar's, most likely: whose, only the whole pass
		// tells.
		if idx < f.Size {
			rep.Problems = append(rep.Problems, log.Problem{Part: where, Msg: fmt.Sprintf("is at index %d, inside the checkpoint of size %d it claims to anchor", idx, f.Size)})
		}
		p.away = append(p.away, awayEntry{idx: idx, record: f.Record, sidecar: f.Sidecar})
		return
	}
	if st == nil {
		rep.Problems = append(rep.Problems, log.Problem{Part: where, Msg: fmt.Sprintf("names record %s, which is not stored", f.Record)})
		return
	}
	if idx < f.Size {
		rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + where, Msg: fmt.Sprintf("is at index %d, inside the checkpoint of size %d it claims to anchor", idx, f.Size)})
	}
	if pr := compareEntry(f, st); pr != nil {
		rep.Problems = append(rep.Problems, log.Problem{Part: st.Name + ": " + pr.Part, Msg: fmt.Sprintf("%s (anchor entry %d)", pr.Msg, idx)})
	}
	if f.Sidecar != "" {
		p.mine[f.Sidecar] = true
	}
	p.logged[st.Name] = true
}

// An awayEntry is an anchor entry of a shared log whose record is not in
// this data dir, and the sidecar it names.
type awayEntry struct {
	idx             uint64
	record, sidecar string
}

// settleAway sorts the anchor entries whose records are not here: those
// of this data dir's sidecar name a record that is missing; the others',
// kept in their own data dirs, are counted.
func (p *entryPass) settleAway() {
	for _, a := range p.away {
		if !p.mine[a.sidecar] {
			p.rep.Elsewhere++
			continue
		}
		p.rep.Problems = append(p.rep.Problems, log.Problem{Part: fmt.Sprintf("anchor entry %d", a.idx),
			Msg: fmt.Sprintf("names record %s of this data dir's sidecar %s, which is not stored", a.record, a.sidecar)})
	}
}

// unreadable counts the entries whose time the pass could not read, and
// keeps the first with why: a log whose entries do not parse fails the
// log's own audit, so one problem here says enough.
type unreadable struct {
	n     int
	first uint64
	err   error
}

func (u *unreadable) add(idx uint64, b []byte) {
	if u.n == 0 {
		u.first, u.err = idx, errors.New("it has no \"time\" member")
		if _, err := log.ParseEntry(b); err != nil {
			u.err = err
		}
	}
	u.n++
}

func (u *unreadable) report(rep *AuditReport) {
	if u.n == 0 {
		return
	}
	more := ""
	if u.n > 1 {
		more = fmt.Sprintf(" (and %d more entries)", u.n-1)
	}
	rep.Problems = append(rep.Problems, log.Problem{Part: fmt.Sprintf("entry %d", u.first),
		Msg: fmt.Sprintf("its time cannot be read%s, so the anchors covering it cannot be checked against it: %v", more, u.err)})
}
