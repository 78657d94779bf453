package main

import (
	"context"
	"fmt"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
)

// maxKeyProblems bounds the fence key rows one audit names; it counts
// them all.
const maxKeyProblems = 100

// keysAudit is what auditFenceKeys found: rows checked against the
// entries, rows that name entries committed after the audited size (left
// to the next audit), and the problems.
type keysAudit struct {
	checked, later, bad int
	pe                  log.ProblemsError
}

func (k *keysAudit) problem(part, format string, args ...any) {
	if k.bad++; k.bad <= maxKeyProblems {
		k.pe.Problems = append(k.pe.Problems, log.Problem{Part: part, Msg: fmt.Sprintf(format, args...)})
	}
}

// auditFenceKeys checks every row of a shared log's fence keys
// (provlog_keys) against its entries, audited up to size: the genesis
// key's row must name entry 0, each task's the task's latest entry as
// rebuilt in tasks, each call's (opp.CallKey) a call an observed claim
// cites, and every task must have its row (those without are
// named, up to maxKeyProblems, and counted). A row put in by
// hand (or left stale) fences off appends that should pass, such as every
// acceptance of a task, or lets through what it should fence off. A row
// that names an entry committed after size, by sidecars still running, is
// left to the next audit; one past the log's size when the rows were
// read names no entry at all.
func auditFenceKeys(ctx context.Context, s *logpg.Store, tasks *opp.Tasks, size uint64) (*keysAudit, error) {
	k := &keysAudit{pe: log.ProblemsError{What: "fence keys"}}
	var past []row
	present := 0    // rows of the keys the entries give, right or wrong
	var purges *row // the purge key's row (purgeFence), checked once the rows are read
	now, err := s.FenceKeys(ctx, func(key string, last uint64) error {
		if call, ok := opp.ParseCallKey(key); ok {
			k.callKey(key, call, last, size, tasks, &past)
			return nil
		}
		if key == purgeFence {
			purges = &row{key, last}
			return nil
		}
		want, ok := tasks.Last(key)
		if ok || key == server.GenesisKey {
			present++
		}
		switch {
		case last >= size:
			past = append(past, row{key, last})
			return nil
		case key == server.GenesisKey:
			if last != 0 {
				k.problem(fmt.Sprintf("fence key %q", key), "names entry %d, but the genesis is entry 0", last)
			}
		case !ok:
			k.problem(fmt.Sprintf("fence key %q", key), "names entry %d, but no task of this id is in the log's first %d entries", last, size)
		case want != last:
			k.problem(fmt.Sprintf("fence key %q", key), "names entry %d, but the task's latest entry is entry %d", last, want)
		}
		k.checked++
		return nil
	})
	if err != nil {
		return k, err
	}
	if purges != nil {
		if err := k.purgeKey(ctx, s, *purges, size, &past); err != nil {
			return k, err
		}
	}
	for _, r := range past {
		if r.last < now {
			k.later++
			continue
		}
		k.checked++
		k.problem(fmt.Sprintf("fence key %q", r.key), "names entry %d, but the log holds %d entries", r.last, now)
	}
	// A row of a task of the first size entries is committed with the
	// task's first entry, so rows of later tasks or later entries do not
	// stand in for a missing one.
	if want := tasks.Len() + 1; size > 0 && present < want {
		k.problem("fence keys", "%d of the %d keys the entries give (the tasks and the genesis) have no row: appends fenced on them are not fenced off", want-present, want)
		if err := k.nameMissing(ctx, s, tasks); err != nil {
			return k, err
		}
	}
	if k.bad > maxKeyProblems {
		k.pe.Problems = append(k.pe.Problems, log.Problem{Part: "fence keys", Msg: fmt.Sprintf("and %d more rows", k.bad-maxKeyProblems)})
	}
	return k, nil
}

// callKey checks the row of a call's key (opp.CallKey: an observed claim
// citing the call was appended fenced on it): some observed claim cites
// the call, after it. Claims an older provlog wrote have no such row, so
// none is missed.
func (k *keysAudit) callKey(key string, call, last, size uint64, tasks *opp.Tasks, past *[]row) {
	switch {
	case last >= size:
		*past = append(*past, row{key, last})
		return
	case !tasks.CitedCall(call):
		k.problem(fmt.Sprintf("fence key %q", key), "names entry %d, but no observed claim in the log's first %d entries cites call %d", last, size, call)
	case last <= call:
		k.problem(fmt.Sprintf("fence key %q", key), "names entry %d, but a claim citing call %d comes after it", last, call)
	}
	k.checked++
}

// purgeKey checks the row of the purge key (purgeFence: purge entries
// are appended fenced on it): it names a purge entry. Purge entries an
// older provlog wrote have no row, and may come after it.
func (k *keysAudit) purgeKey(ctx context.Context, s *logpg.Store, r row, size uint64, past *[]row) error {
	if r.last >= size {
		*past = append(*past, r)
		return nil
	}
	es, err := s.Entries(ctx, r.last, r.last+1)
	if err != nil {
		return err
	}
	k.checked++
	if len(es) != 1 {
		k.problem(fmt.Sprintf("fence key %q", r.key), "names entry %d, which the log does not hold", r.last)
	} else if e, err := log.ParseEntry(es[0]); err != nil || e.Kind != blobs.KindPurge {
		k.problem(fmt.Sprintf("fence key %q", r.key), "names entry %d, but it is not a purge entry", r.last)
	}
	return nil
}

// row is a fence key row.
type row struct {
	key  string
	last uint64
}

// nameMissing names each key the entries give that has no fence key row:
// the genesis's and the tasks'. Only an audit that found some missing
// reads the rows again, for a set of their keys: the keys of a large log
// are not held otherwise. A row put in between the two reads leaves its
// key unnamed; the count stands.
func (k *keysAudit) nameMissing(ctx context.Context, s *logpg.Store, tasks *opp.Tasks) error {
	rows := map[string]bool{}
	_, err := s.FenceKeys(ctx, func(key string, _ uint64) error {
		if _, ok := tasks.Last(key); ok || key == server.GenesisKey {
			rows[key] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !rows[server.GenesisKey] {
		k.problem(fmt.Sprintf("fence key %q", server.GenesisKey), "has no row, but the log has its genesis entry (entry 0)")
	}
	for id := range tasks.IDs() {
		if !rows[id] {
			last, _ := tasks.Last(id)
			k.problem(fmt.Sprintf("fence key %q", id), "has no row, but the task is in the log (its latest entry is entry %d)", last)
		}
	}
	return nil
}

// fenceKeys is audit's check of a shared log's fence keys (nil for
// another log): an error if a row disagrees with the entries.
func (a *auditRun) fenceKeys(ctx context.Context, src log.AuditSource, tasks *opp.Tasks, size uint64) (*keysAudit, error) {
	ps, ok := src.(*logpg.Store)
	if !ok {
		return nil, nil
	}
	keys, err := auditFenceKeys(ctx, ps, tasks, size)
	if err != nil {
		return nil, err
	}
	a.rep.Keys = keys.checked
	if keys.bad > 0 {
		for _, p := range keys.pe.Problems {
			fmt.Fprintln(a.stderr, p.String())
		}
		return nil, failed(&keys.pe, "FAILED: %d fence key rows (provlog_keys) disagree with the entries: a row put in or changed by hand fences off appends that should pass, such as a task's acceptance; delete or correct the rows named", keys.bad)
	}
	return keys, nil
}
