package main

// The running sidecar's side of purging: POST /log/purge for provlog purge
// --log, the background retention of the config's retention: section, and
// the payload check of provlog audit and verify-bundle.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/proxy/authn"
)

// DefaultRetentionInterval is how often retention runs.
const DefaultRetentionInterval = time.Hour

// mayPurge reports whether an actor may ask the sidecar to purge.
func (s *sidecar) mayPurge(actor string) bool {
	if len(s.cfg.Retention.Purgers) == 0 {
		return actor == s.cfg.Actor
	}
	return slices.Contains(s.cfg.Retention.Purgers, actor)
}

// purgeHandler serves POST /log/purge.
func (s *sidecar) purgeHandler(w http.ResponseWriter, r *http.Request) {
	id, err := s.authn.Request(r)
	if err == nil && id.Reader {
		err = &authn.Error{Status: http.StatusForbidden, Description: "a reader token may not purge"}
	}
	if err == nil {
		// Purging is a log operation: an OAuth token needs the log's
		// scopes, as the log API's reads do, not only a purger's actor
		// (a token minted for tools alone must not erase payloads).
		err = s.authn.Require(id, authn.GroupLog)
	}
	if err != nil {
		s.authn.WriteError(w, fmt.Errorf("purging needs the token of an actor listed under retention.purgers (default: the config's actor): %w", err))
		return
	}
	if !s.mayPurge(id.Actor) {
		http.Error(w, fmt.Sprintf("actor %q may not purge; list it under retention.purgers in the config", id.Actor), http.StatusForbidden)
		return
	}
	var req purgeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "the body is not a purge request: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := purge(log.WithAuth(r.Context(), id.Auth), s.seq, s.store, s.blobs, &s.ages, id.Actor, req)
	if errors.Is(err, cli.ErrUsage) {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		s.logger.Error("purge failed", "actor", id.Actor, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.logger.Info("purged", "actor", id.Actor, "reason", req.Reason, "blobs", len(res.Blobs), "entries", res.Entries, "dry_run", req.DryRun)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

// runRetention purges, every interval until ctx is done, the payloads of
// entries older than max_age.
func (s *sidecar) runRetention(ctx context.Context) {
	rc := s.cfg.Retention
	iv := rc.Interval
	if iv <= 0 {
		iv = DefaultRetentionInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		req := purgeRequest{
			Before: time.Now().Add(-rc.MaxAge).UTC().Format(time.RFC3339Nano),
			Reason: "retention: max_age " + rc.MaxAge.String(),
		}
		res, err := purge(ctx, s.seq, s.store, s.blobs, &s.ages, purgeActor, req)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Error("retention: purge failed", "err", err)
		case err == nil && len(res.Blobs) > 0:
			s.logger.Info("retention: purged", "blobs", len(res.Blobs), "entries", res.Entries, "kept_shared", res.Kept)
		}
		if err == nil {
			s.saveAges(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// payloadReport is what audit and verify-bundle say about the blobs
// entries name.
type payloadReport struct {
	Named   int `json:"named"`
	Present int `json:"present"`
	Purged  int `json:"purged"`
	// PurgedBy is each purged payload with the purge entry that records
	// it (verify-bundle).
	PurgedBy []purgedPayload `json:"purged_payloads,omitempty"`
	Missing  []string        `json:"-"` // "entry N: blob H"
	Corrupt  []string        `json:"-"`
	// Unreadable are the payloads the store could not look up (an I/O
	// error, an unreachable database): neither there nor known absent.
	Unreadable []string `json:"-"`
	// Unfinished are the payloads a purge entry names as deleted that
	// are still there: the purge did not finish (run it again).
	Unfinished []string `json:"-"`
}

// A purgedPayload is one payload an entry names and a purge entry purged.
type purgedPayload struct {
	Entry  uint64    `json:"entry"` // the entry naming it
	Kind   string    `json:"kind"`
	Blob   string    `json:"blob"`
	Purge  uint64    `json:"purge_entry"`
	Time   time.Time `json:"purged_at"`
	Actor  string    `json:"purged_by"`
	Reason string    `json:"reason"`
}

// payloadRefs gathers, from entries seen one at a time, the blobs each
// names and the purge entries naming each blob; check then judges them.
type payloadRefs struct {
	purged map[string][]purgeRef // by blob, in the log's order
	refs   []refAt
}

// A purgeRef is a purge entry that purged a blob.
type purgeRef struct {
	index uint64
	e     *blobs.PurgeEntry
}

type refAt struct {
	index uint64
	time  time.Time
	kind  string
	blob  string
}

func (p *payloadRefs) add(i uint64, e *log.Entry) {
	if p.purged == nil {
		p.purged = map[string][]purgeRef{}
	}
	if e == nil {
		return
	}
	if e.Kind == blobs.KindPurge {
		if pe, err := blobs.ParsePurge(e); err == nil {
			for _, b := range pe.Blobs {
				p.purged[b] = append(p.purged[b], purgeRef{i, pe})
			}
		}
	}
	for _, h := range blobs.Refs(e) {
		p.refs = append(p.refs, refAt{i, e.Time, e.Kind, h})
	}
}

// purgedAfter returns the first purge entry after entry i, written at t,
// that names blob and covers the entry (blobs.PurgeEntry.Covers): only a
// purge written after an entry removes that entry's payload, and a
// retention's only if the entry is older than its cut. A blob purged and
// then kept again by a newer entry is that entry's, and must be there.
func (p *payloadRefs) purgedAfter(blob string, i uint64, t time.Time) (purgeRef, bool) {
	for _, pr := range p.purged[blob] {
		if pr.index > i && pr.e.Covers(t) {
			return pr, true
		}
	}
	return purgeRef{}, false
}

// keptBlobs returns the blobs that an entry covered by no purge entry
// after it names: each is that entry's, and must be there.
func (p *payloadRefs) keptBlobs() map[string]bool {
	kept := map[string]bool{}
	for _, r := range p.refs {
		if _, purged := p.purgedAfter(r.blob, r.index, r.time); !purged {
			kept[r.blob] = true
		}
	}
	return kept
}

// check says of each named blob whether it is purged (a purge entry after
// the naming entry names it and covers that entry: purgedAfter), present with the right bytes, missing or
// corrupt. A purged blob still in the store that no newer entry kept
// again is an unfinished purge: the purge entry says it is gone, and it
// is not. bs nil: no blob store to look in (a bundle), so only the
// purged ones are counted, and each is listed with its purge entry.
func (p *payloadRefs) check(bs *blobs.Store) payloadReport {
	var rep payloadReport
	kept := p.keptBlobs()
	for _, r := range p.refs {
		rep.Named++
		pr, purged := p.purgedAfter(r.blob, r.index, r.time)
		switch {
		case purged && bs != nil && !kept[r.blob]:
			rep.purgedFrom(bs, r, pr)
		case purged:
			rep.Purged++
			if bs == nil {
				rep.PurgedBy = append(rep.PurgedBy, purgedPayload{Entry: r.index, Kind: r.kind, Blob: r.blob, Purge: pr.index,
					Time: pr.e.Time, Actor: pr.e.Actor, Reason: pr.e.Reason})
			}
		case bs != nil:
			rep.stored(bs, r)
		}
	}
	return rep
}

// purgedFrom judges a payload purge entry pr removed, whose blob no newer
// entry names: gone, as pr says, or still there (the deletion failed).
func (rep *payloadReport) purgedFrom(bs *blobs.Store, r refAt, pr purgeRef) {
	ok, err := bs.Has(r.blob)
	switch {
	case err != nil:
		rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("entry %d: %v", r.index, err))
	case ok:
		rep.Unfinished = append(rep.Unfinished, fmt.Sprintf("entry %d: blob %s: purge entry %d names it, but it is still there", r.index, r.blob, pr.index))
	default:
		rep.Purged++
	}
}

// stored judges a payload no purge entry removed: present and intact,
// missing, corrupt, or unreadable (the store could not say).
func (rep *payloadReport) stored(bs *blobs.Store, r refAt) {
	ok, err := bs.Has(r.blob)
	switch {
	case err != nil:
		rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("entry %d: %v", r.index, err))
	case !ok:
		rep.Missing = append(rep.Missing, fmt.Sprintf("entry %d: blob %s", r.index, r.blob))
	default:
		if _, err := bs.Get(r.blob); err != nil {
			rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("entry %d: %v", r.index, err))
		} else {
			rep.Present++
		}
	}
}

// auditDataDirPayloads is the payload part of `provlog audit --data D`.
func auditDataDirPayloads(ctx context.Context, data string, src interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}, size uint64, stdout io.Writer) error {
	var pr payloadRefs
	for start := uint64(0); start < size; start += 4096 {
		es, err := src.Entries(ctx, start, min(size, start+4096))
		if err != nil {
			return err
		}
		for j, b := range es {
			e, _ := log.ParseEntry(b) // log.Audit already judged every entry
			pr.add(start+uint64(j), e)
		}
	}
	bs, err := openBlobs(data, src)
	if err != nil {
		return err
	}
	rep := pr.check(bs)
	if len(rep.Missing) > 0 || len(rep.Corrupt) > 0 || len(rep.Unreadable) > 0 || len(rep.Unfinished) > 0 {
		pe := &log.ProblemsError{What: "payloads"}
		for _, m := range rep.Missing {
			fmt.Fprintf(stdout, "missing (no purge entry after it covers it): %s\n", m)
			part, what, _ := strings.Cut(m, ": ")
			pe.Problems = append(pe.Problems, log.Problem{Part: part, Msg: what + " is missing, and no purge entry after it covers it (a retention purge covers only entries older than its cut)"})
		}
		for _, c := range rep.Corrupt {
			fmt.Fprintf(stdout, "tampered: %s\n", c)
			part, what, _ := strings.Cut(c, ": ")
			pe.Problems = append(pe.Problems, log.Problem{Part: part, Msg: "tampered payload: " + what})
		}
		for _, u := range rep.Unreadable {
			fmt.Fprintf(stdout, "unreadable: %s\n", u)
			part, what, _ := strings.Cut(u, ": ")
			pe.Problems = append(pe.Problems, log.Problem{Part: part, Msg: "payload could not be checked: " + what})
		}
		for _, u := range rep.Unfinished {
			fmt.Fprintf(stdout, "not purged (the purge did not finish; run it again): %s\n", u)
			part, what, _ := strings.Cut(u, ": ")
			pe.Problems = append(pe.Problems, log.Problem{Part: part, Msg: what + ": the purge did not finish (run it again)"})
		}
		return failed(pe, "FAILED: of %d payloads the entries name, %d are missing without a purge entry, %d do not hash to their name, %d could not be checked and %d are still there though a purge entry names them",
			rep.Named, len(rep.Missing), len(rep.Corrupt), len(rep.Unreadable), len(rep.Unfinished))
	}
	fmt.Fprintf(stdout, "OK: payloads: %d named by entries, %d present and intact, %d purged (named by purge entries)\n",
		rep.Named, rep.Present, rep.Purged)
	return nil
}

// bundlePayloads says how many payloads a bundle's entries name and which
// of them its purge entries record as purged (a bundle carries no blobs).
func bundlePayloads(ctx context.Context, be *bundle.Entries) (payloadReport, error) {
	var pr payloadRefs
	end := be.End()
	for start := be.From(); start < end; start += 4096 {
		es, err := be.Entries(ctx, start, min(end, start+4096))
		if err != nil {
			return payloadReport{}, err
		}
		for i, b := range es {
			e, _ := log.ParseEntry(b)
			pr.add(start+uint64(i), e)
		}
	}
	return pr.check(nil), nil
}

// saveAges saves the age index in the data dir, if it has read any of
// the log; a failure costs the next start one read of the whole log.
func (s *sidecar) saveAges(ctx context.Context) {
	s.ages.mu.Lock()
	defer s.ages.mu.Unlock()
	if s.ages.next == 0 {
		return
	}
	if err := s.ages.save(ctx, filepath.Join(s.cfg.Data, retentionIndexFile), s.store); err != nil {
		s.logger.Warn("the retention index was not saved; the next start reads the whole log for it", "err", err)
	}
}

// blobNamed says whether blob sum, which the entry at index entry names,
// is named still: no purge entry after it names it and covers it (namedSince, the look
// a purge's restore takes too). The proxy asks it of a blob found gone
// once an entry naming it is in (proxy.Options.BlobNamed).
func (sc *sidecar) blobNamed(ctx context.Context, sum string, entry uint64) (bool, error) {
	named, _, err := namedSince(ctx, sc.store, entry)
	return named[sum], err
}
