package main

// `provlog purge` and the sidecar's retention: delete retained payload
// blobs by age, task, actor or name, recording each purge in the log
// first (DESIGN §4). Entries and proofs stay valid: no leaf hash covers a
// blob's bytes, and the entries keep each blob's SHA-256.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/server"
)

// The actors of the entries provlog writes on its own account, beyond
// log.GenesisActor: each is in log.ActorNamespace, which no client may
// act as, so a reader tells them from every client's. Before the
// operator had an id of its own, purge --data wrote as "local" and
// replay --data as the config's actor (default "local"), ids a client
// has too; such logs read as they did.
const (
	purgeActor    = log.RetentionActor
	operatorActor = log.OperatorActor
)

// RetentionConfig is the config's retention: section.
type RetentionConfig struct {
	// MaxAge: retained payloads of entries older than this are purged in
	// the background (0: never).
	MaxAge time.Duration `yaml:"max_age"`
	// Interval is how often retention runs (default 1h).
	Interval time.Duration `yaml:"interval"`
	// Purgers are the actors whose tokens may ask the running sidecar to
	// purge (provlog purge --log); default: the config's actor.
	Purgers []string `yaml:"purgers"`
}

// purgeRequest is the body of POST /log/purge and what provlog purge
// --data does.
type purgeRequest struct {
	Before string   `json:"before,omitempty"` // RFC 3339
	Task   string   `json:"task,omitempty"`
	Actor  string   `json:"actor,omitempty"`
	Blobs  []string `json:"blobs,omitempty"`
	Reason string   `json:"reason"`
	DryRun bool     `json:"dry_run,omitempty"`
}

// purgeResult says what a purge did.
type purgeResult struct {
	Blobs   []string `json:"blobs"`   // purged (or, dry run, to purge)
	Entries []uint64 `json:"entries"` // the purge entries written
	Kept    int      `json:"kept"`    // selected blobs kept: newer entries still name them
}

func (r purgeRequest) criteria() (blobs.PurgeCriteria, error) {
	c := blobs.PurgeCriteria{Task: r.Task, Actor: r.Actor, Blobs: r.Blobs}
	if r.Before != "" {
		t, err := time.Parse(time.RFC3339Nano, r.Before)
		if err != nil {
			return c, fmt.Errorf("before %q is not an RFC 3339 time", r.Before)
		}
		c.Before = t
	}
	if c.Before.IsZero() && c.Task == "" && c.Actor == "" && len(c.Blobs) == 0 {
		return c, errors.New("say what to purge: --older-than, --before, --task, --actor or --blob")
	}
	if strings.TrimSpace(r.Reason) == "" {
		return c, errors.New("--reason is required: the purge entry records why")
	}
	for _, b := range c.Blobs {
		if len(b) != 64 || strings.ToLower(b) != b {
			return c, fmt.Errorf("blob %q is not a lowercase hex SHA-256", b)
		}
	}
	return c, nil
}

// refEntry is what planning keeps of an entry that names blobs.
type refEntry struct {
	index uint64
	time  time.Time
	actor string
	call  int64 // for a call.result: its call's index, else -1
	refs  []string
}

// planPurge reads the log's entries and returns the blobs an erasure's
// crit selects that the store holds: wherever a selected entry names
// them. Of those, fresh need a purge entry; again are already named by a
// purge entry after every entry naming them (an erasure whose deletion
// failed, run again), and are deleted without another. (A purge by age
// alone is the ageIndex's.)
func planPurge(ctx context.Context, src interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}, size uint64, crit blobs.PurgeCriteria, bs *blobs.Store) (fresh, again []string, err error) {
	var refs []refEntry
	taskEntries := map[uint64]bool{}
	// What the criteria name must be in the log: a mistyped task id,
	// actor or hash purged nothing and looked like a purge that worked.
	seenActor, named := false, map[string]uint64{}
	purged := map[string]uint64{} // the last purge entry covering every entry naming a blob
	newest := map[string]time.Time{}
	for start := uint64(0); start < size; start += 4096 {
		es, err := src.Entries(ctx, start, min(size, start+4096))
		if err != nil {
			return nil, nil, err
		}
		for j, b := range es {
			i := start + uint64(j)
			e, err := log.ParseEntry(b)
			if err != nil {
				continue // audit reports it; purging needs only what parses
			}
			if pe, err := blobs.ParsePurge(e); err == nil {
				covered(pe, i, newest, purged)
			}
			seenActor = seenActor || e.Actor == crit.Actor
			if crit.Task != "" && e.Fields["task_id"] == crit.Task {
				taskEntries[i] = true
				if ev, ok := e.Fields["evidence"].([]any); ok {
					for _, v := range ev {
						if n, ok := v.(json.Number); ok {
							if k, err := n.Int64(); err == nil && k >= 0 {
								taskEntries[uint64(k)] = true
							}
						} else if f, ok := v.(float64); ok && f >= 0 {
							taskEntries[uint64(f)] = true
						}
					}
				}
			}
			if r := blobs.Refs(e); len(r) > 0 {
				for _, h := range r {
					if named[h] = i; e.Time.After(newest[h]) {
						newest[h] = e.Time
					}
				}
				call := int64(-1)
				if e.Kind == log.KindCallResult {
					if f, ok := e.Fields["call"].(float64); ok {
						call = int64(f)
					} else if n, ok := e.Fields["call"].(json.Number); ok {
						call, _ = n.Int64()
					}
				}
				refs = append(refs, refEntry{index: i, time: e.Time, actor: e.Actor, call: call, refs: r})
			}
		}
	}
	switch {
	case crit.Task != "" && len(taskEntries) == 0:
		return nil, nil, fmt.Errorf("no entry of the log names task %q; nothing purged (check the id: provlog tasks list)", crit.Task)
	case crit.Actor != "" && !seenActor:
		return nil, nil, fmt.Errorf("no entry of the log is by actor %q; nothing purged (check the id)", crit.Actor)
	}
	for _, h := range crit.Blobs {
		if _, ok := named[h]; !ok {
			return nil, nil, fmt.Errorf("no entry of the log names blob %s; nothing purged (check the hash)", h)
		}
	}
	selected := func(r refEntry) bool {
		if !crit.Before.IsZero() && !r.time.Before(crit.Before) {
			return false
		}
		if crit.Actor != "" && r.actor != crit.Actor {
			return false
		}
		if crit.Task != "" && !taskEntries[r.index] && !(r.call >= 0 && taskEntries[uint64(r.call)]) {
			return false
		}
		if len(crit.Blobs) > 0 && !slices.ContainsFunc(r.refs, func(s string) bool { return slices.Contains(crit.Blobs, s) }) {
			return false
		}
		return true
	}
	pick := map[string]bool{}
	for _, r := range refs {
		if !selected(r) {
			continue
		}
		for _, s := range r.refs {
			if len(crit.Blobs) == 0 || slices.Contains(crit.Blobs, s) {
				pick[s] = true
			}
		}
	}
	return present(bs, pick, func(s string) bool { p, ok := purged[s]; return ok && p > named[s] })
}

// covered notes, of the blobs purge entry pe (at index i) names, those
// it covers every entry naming so far (newest: the newest of their
// times) as purged at i.
func covered(pe *blobs.PurgeEntry, i uint64, newest map[string]time.Time, purged map[string]uint64) {
	for _, h := range pe.Blobs {
		if pe.Covers(newest[h]) {
			purged[h] = i
			delete(newest, h)
		}
	}
}

// present returns the blobs of pick the store has (not "held": that is
// blobs.Store.Hold), sorted, split by whether
// a purge entry already records them. An erasure that cannot tell whether
// a blob is there fails rather than pass over it.
func present(bs *blobs.Store, pick map[string]bool, recorded func(string) bool) (fresh, again []string, err error) {
	for s := range pick {
		ok, err := bs.Has(s)
		switch {
		case err != nil:
			return nil, nil, err
		case ok && recorded(s):
			again = append(again, s)
		case ok:
			fresh = append(fresh, s)
		}
	}
	slices.Sort(fresh)
	slices.Sort(again)
	return fresh, again, nil
}

// purgeFence is the fence key of every purge entry (log.Fence): on a
// shared log, a purge entry is committed only if no other purge entry
// was since its writer's plan, so two sidecars purging at once (each
// one's retention) do not both record the same blobs purged.
const purgeFence = "purge:"

// purgeTries is how many times a purge is planned and run again when
// another writer's purge entry was committed first (log.ErrFenced).
const purgeTries = 4

// purge plans and runs one purge on an open log: the purge entries are
// committed first, then the blobs are deleted. A purge by age alone uses
// ages (nil: a new one, which reads the whole log). The entries keep the
// OAuth token of the request that asked, if ctx carries one (log.WithAuth).
// When another sidecar of a shared log commits a purge entry between this
// one's plan and its entry, the purge is planned again from the log as it
// is then: what the other recorded is not recorded twice.
func purge(ctx context.Context, seq *server.Sequencer, store log.Storage, bs *blobs.Store, ages *ageIndex, actor string, req purgeRequest) (*purgeResult, error) {
	// One purge at a time in a sidecar (its retention, an erasure asked
	// of it): one planned while another deletes would record the other's
	// blobs purged again, and take them, doomed, for a call's.
	if ages == nil {
		ages = &ageIndex{}
	}
	ages.mu.Lock()
	defer ages.mu.Unlock()
	var done purgeResult // what the tries fenced off wrote and deleted
	for try := 1; ; try++ {
		res, err := purgeOnce(ctx, seq, store, bs, ages, actor, req)
		if res != nil {
			done.Entries = append(done.Entries, res.Entries...)
			done.Blobs = append(done.Blobs, res.Blobs...)
		}
		if !errors.Is(err, log.ErrFenced) {
			if err != nil {
				return nil, err
			}
			res.Entries, res.Blobs = done.Entries, slices.Compact(slices.Sorted(slices.Values(done.Blobs)))
			return res, nil
		}
		if try == purgeTries {
			return nil, fmt.Errorf("purge entries %v are written, but %d times another writer of the log committed a purge entry first, so the rest of the purge was not recorded (run the purge again): %w", done.Entries, try, err)
		}
	}
}

// purgeOnce is one try of purge; the caller holds ages.mu. When its purge entry is fenced off, it
// returns an error wrapping log.ErrFenced and, if earlier chunks were
// written, their entries and deleted blobs.
func purgeOnce(ctx context.Context, seq *server.Sequencer, store log.Storage, bs *blobs.Store, ages *ageIndex, actor string, req purgeRequest) (*purgeResult, error) {
	crit, err := req.criteria()
	if err != nil {
		return nil, usageErr("%v", err)
	}
	size, _ := seq.Checkpoint()
	var list, again []string
	kept := 0
	if ageOnly(crit) {
		list, again, kept, err = ages.pick(ctx, store, size, crit.Before, bs)
	} else {
		list, again, err = planPurge(ctx, store, size, crit, bs)
	}
	if err != nil {
		return nil, fmt.Errorf("planning the purge: %w", err)
	}
	res := &purgeResult{Blobs: slices.Sorted(slices.Values(slices.Concat(list, again))), Entries: []uint64{}, Kept: kept}
	if req.DryRun || len(res.Blobs) == 0 {
		return res, nil
	}
	// From here on, a call's entry naming one of these blobs does not
	// slip in between the plan and the deletion unseen (blobs/hold.go):
	// busy are those an entry on its way names, not deleted now.
	doomed := bs.Doom(res.Blobs)
	defer bs.Undoom(doomed)
	busy := map[string]bool{}
	for _, s := range res.Blobs {
		_, ok := slices.BinarySearch(doomed, s)
		busy[s] = !ok
	}
	look := size // retention: where its last look at the log ended
	if ageOnly(crit) {
		// Retention keeps a blob a newer entry names: one on its way,
		// or one committed since the plan.
		if list, again, look, err = keepNamedSince(ctx, store, size, busy, list, again); err != nil {
			return nil, fmt.Errorf("planning the purge: %w", err)
		}
		res.Kept += len(res.Blobs) - len(list) - len(again)
		res.Blobs = slices.Sorted(slices.Values(slices.Concat(list, again)))
	}
	free := func(l []string) []string {
		return slices.DeleteFunc(slices.Clone(l), func(s string) bool { return busy[s] })
	}
	recheck := &lookAgain{on: ageOnly(crit), store: store, look: look, kept: map[string]bool{}}
	deleted := 0
	after := size // the plan read the log to here
	for i := 0; i < len(list); i += blobs.MaxPurgeBlobs {
		chunk := list[i:min(len(list), i+blobs.MaxPurgeBlobs)]
		b, err := (&blobs.PurgeEntry{Time: time.Now(), Actor: actor, Auth: log.AuthFrom(ctx), Reason: req.Reason, Criteria: crit, Blobs: chunk}).Marshal()
		if err != nil {
			return nil, err
		}
		rc, err := seq.AppendFenced(ctx, b, log.Fence{Key: purgeFence, After: after})
		if errors.Is(err, log.ErrFenced) {
			// Another writer's purge entry came after the plan: plan again.
			return &purgeResult{Entries: res.Entries, Blobs: list[:i]}, err
		}
		if err != nil && i == 0 {
			return nil, fmt.Errorf("recording the purge (nothing was deleted): %w", err)
		}
		if err != nil {
			// The chunks before are recorded and deleted: say so.
			return nil, fmt.Errorf("purge entries %v are written and %d blobs deleted, but recording the rest of the purge failed, so %d of its %d blobs were not deleted (run the purge again): %w",
				res.Entries, deleted, len(list)-i, len(list), err)
		}
		res.Entries = append(res.Entries, uint64(rc.Index))
		after = uint64(rc.Index) + 1
		del, err := recheck.unnamed(ctx, free(chunk))
		if err != nil {
			return nil, fmt.Errorf("purge entry %d is written, but %w", rc.Index, err)
		}
		if err := deleteBlobs(ctx, store, bs, del, uint64(rc.Index)+1, seq.Shared()); err != nil {
			return nil, fmt.Errorf("purge entry %d is written, but %w", rc.Index, err)
		}
		deleted += len(del)
	}
	// Blobs a purge entry already names are deleted without another: a
	// retry of a purge whose deletion failed writes nothing new.
	del, err := recheck.unnamed(ctx, free(again))
	if err == nil {
		err = deleteBlobs(ctx, store, bs, del, size, seq.Shared())
	}
	if err != nil {
		return nil, fmt.Errorf("the purge is recorded, but %w", err)
	}
	res.Blobs = slices.DeleteFunc(res.Blobs, func(s string) bool { return recheck.kept[s] })
	res.Kept += len(recheck.kept)
	if n := len(res.Blobs) - len(free(res.Blobs)); n > 0 {
		// An erasure's blob that a call on its way names too: deleted
		// now, that call's entry would name a payload already gone.
		return nil, fmt.Errorf("purge entries %v are written, but %d blobs are named by calls under way, and were not deleted (run the purge again)", res.Entries, n)
	}
	return res, nil
}

// lookAgain is retention's look at the log once a purge entry is in and
// before it deletes that entry's blobs: a call through another sidecar
// may have committed an entry naming one after the last look (look) and
// before the purge entry. Such a blob is kept (kept): the purge entry
// does not cover an entry newer than its cut (blobs.PurgeEntry.Covers).
// An erasure (on false) deletes wherever a blob is named.
type lookAgain struct {
	on    bool
	store log.Storage
	look  uint64
	kept  map[string]bool
}

// unnamed returns l less the blobs an entry from look on names and no
// purge entry since covers (namedSince), noting those in kept.
func (r *lookAgain) unnamed(ctx context.Context, l []string) ([]string, error) {
	if !r.on || len(l) == 0 {
		return l, nil
	}
	named, _, err := namedSince(ctx, r.store, r.look)
	if err != nil {
		return nil, fmt.Errorf("reading the entries since its last look failed, so none of its blobs was deleted (run the purge again): %w", err)
	}
	return slices.DeleteFunc(l, func(s string) bool {
		if named[s] {
			r.kept[s] = true
		}
		return named[s]
	}), nil
}

// keepNamedSince drops from list and again the blobs busy marks and those
// the entries committed since the plan (from size on) name, and returns
// the size it read to.
func keepNamedSince(ctx context.Context, store log.Storage, size uint64, busy map[string]bool, list, again []string) ([]string, []string, uint64, error) {
	named, look, err := namedSince(ctx, store, size)
	if err != nil {
		return nil, nil, 0, err
	}
	keep := func(s string) bool { return busy[s] || named[s] }
	return slices.DeleteFunc(list, keep), slices.DeleteFunc(again, keep), look, nil
}

// namedSince returns the blobs the entries from index from on name and
// no purge entry after the last of them covers (blobs.PurgeEntry.Covers:
// a retention's purge entry leaves a blob an entry newer than its cut
// names), up to the store's size now, which it returns too: on a shared
// log the newest any writer committed (log.SharedStorage.Latest, read
// from the store: the handle's own State may not have heard of another
// sidecar's last commit yet), which holds the other sidecars' entries
// this one's sequencer has not seen. A blob it leaves out that is gone
// stays gone: a purge entry says so.
func namedSince(ctx context.Context, store log.Storage, from uint64) (map[string]bool, uint64, error) {
	var st log.State
	var err error
	if sh, ok := store.(log.SharedStorage); ok {
		st, err = sh.Latest(ctx)
	} else {
		st, err = store.State(ctx)
	}
	if err != nil {
		return nil, 0, err
	}
	named, newest := map[string]bool{}, map[string]time.Time{}
	for start := from; start < st.Size; start += 4096 {
		es, err := store.Entries(ctx, start, min(st.Size, start+4096))
		if err != nil {
			return nil, 0, err
		}
		for _, b := range es {
			e, err := log.ParseEntry(b)
			if err != nil {
				continue
			}
			for _, h := range blobs.Refs(e) {
				if named[h] = true; e.Time.After(newest[h]) {
					newest[h] = e.Time
				}
			}
			if e.Kind != blobs.KindPurge {
				continue
			}
			if pe, err := blobs.ParsePurge(e); err == nil {
				for _, h := range pe.Blobs {
					if pe.Covers(newest[h]) {
						delete(named, h)
						delete(newest, h)
					}
				}
			}
		}
	}
	return named, st.Size, nil
}

// deleteBlobs deletes list from bs, stopping at the first that fails,
// then, on a shared log, stores again those an entry from index after on
// names. Holds are a process's own: a call through another sidecar may
// have found a blob there before it was deleted, and its entry, after
// the purge entry, names it. (One that comes in after this look stores
// the blob again itself: the proxy's blobSet.named.) A log of one
// sidecar needs none of it: its calls' holds keep such blobs. The blobs
// read back to store again are held restoreBudget bytes at a time: each
// time they pass it, the entries since are read and those blobs let go.
func deleteBlobs(ctx context.Context, store log.Storage, bs *blobs.Store, list []string, after uint64, shared bool) error {
	saved, held := map[string][]byte{}, 0
	for _, s := range list {
		if shared {
			if b, err := bs.Get(s); err == nil {
				saved[s], held = b, held+len(b) // a blob that went bad is not stored again
			}
		}
		if err := bs.Purge(s); err != nil {
			return fmt.Errorf("deleting blob %s failed (run the purge again): %w", s, err)
		}
		if held >= restoreBudget {
			if err := restoreNamed(ctx, store, bs, saved, after); err != nil {
				return err
			}
			clear(saved)
			held = 0
		}
	}
	return restoreNamed(ctx, store, bs, saved, after)
}

// restoreBudget is how many bytes of deleted blobs a purge on a shared log
// holds at most before it looks for entries naming them (a var for tests).
var restoreBudget = 64 << 20

// restoreNamed stores again each of saved (deleted blobs, by name) that
// an entry from index after on names.
func restoreNamed(ctx context.Context, store log.Storage, bs *blobs.Store, saved map[string][]byte, after uint64) error {
	if len(saved) == 0 {
		return nil
	}
	named, _, err := namedSince(ctx, store, after)
	if err != nil {
		return fmt.Errorf("the blobs are deleted, but reading the entries since failed (provlog audit names any a newer entry names): %w", err)
	}
	for s, b := range saved {
		if !named[s] {
			continue
		}
		if _, err := bs.Put(b); err != nil {
			return fmt.Errorf("blob %s, which an entry newer than the purge entry names, was deleted, and storing it again failed: %w", s, err)
		}
	}
	return nil
}

func runPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("purge", stderr)
	lf := addLogFlags(fs, "base URL of a running sidecar (it purges; the token's actor must be one of retention.purgers)", "token for --log (default $PROVLOG_TOKEN)")
	olderThan := fs.Duration("older-than", 0, "purge payloads of entries older than this (e.g. 720h)")
	before := fs.String("before", "", "purge payloads of entries written before this RFC 3339 time")
	task := fs.String("task", "", "purge the payloads of one task's entries and of the calls its claims cite")
	actor := fs.String("actor", "", "purge the payloads of one actor's entries")
	var blobList cli.Strings
	fs.Var(&blobList, "blob", "purge the blob with this hex SHA-256 (repeatable)")
	reason := fs.String("reason", "", "why (recorded in the purge entry), e.g. \"erasure request #12\"")
	dry := fs.Bool("dry-run", false, "list what would be purged; write and delete nothing")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	req := purgeRequest{Before: *before, Task: *task, Actor: *actor, Blobs: blobList, Reason: *reason, DryRun: *dry}
	if *olderThan < 0 || *olderThan == 0 && given(fs, "older-than") {
		return usageErr("--older-than must be a positive duration, such as 720h")
	}
	if *olderThan > 0 {
		if req.Before != "" {
			return usageErr("give --older-than or --before, not both")
		}
		req.Before = time.Now().Add(-*olderThan).UTC().Format(time.RFC3339Nano)
	}
	if _, err := req.criteria(); err != nil {
		return usageErr("%v", err)
	}
	var res *purgeResult
	var err error
	if lf.url != "" {
		res, err = newRemote(lf.url, lf.token).purge(ctx, req)
	} else {
		res, err = purgeDataDir(ctx, lf.data, req)
	}
	if err != nil {
		return err
	}
	verb := "purged"
	if req.DryRun {
		verb = "would purge"
	}
	for _, s := range res.Blobs {
		fmt.Fprintln(stdout, s)
	}
	fmt.Fprintf(stdout, "%s %d blobs; purge entries %v", verb, len(res.Blobs), res.Entries)
	if res.Kept > 0 {
		fmt.Fprintf(stdout, "; kept %d that newer entries still name", res.Kept)
	}
	fmt.Fprintln(stdout)
	return nil
}

// purgeDataDir purges in a stopped sidecar's data dir.
func purgeDataDir(ctx context.Context, data string, req purgeRequest) (*purgeResult, error) {
	store, seq, err := openAppender(ctx, data, "")
	if err != nil {
		return nil, err
	}
	defer store.Close()
	defer seq.Close()
	bs, err := blobs.Open(filepath.Join(data, blobDir))
	if err != nil {
		return nil, err
	}
	// The sidecar's saved age index, read on and saved again: a purge by
	// age reads only what was appended since (a bad file: the whole log).
	ages, path := &ageIndex{}, filepath.Join(data, retentionIndexFile)
	size, _ := seq.Checkpoint()
	ages.load(ctx, path, store, size) // refused: it stays empty, and the purge reads the whole log
	res, err := purge(ctx, seq, store, bs, ages, operatorActor, req)
	ages.mu.Lock()
	defer ages.mu.Unlock()
	if err == nil && ages.next > 0 {
		ages.save(ctx, path, store) // a failure costs the next purge one read of the log
	}
	return res, err
}

// purge asks a running sidecar to purge.
func (r *remote) purge(ctx context.Context, req purgeRequest) (*purgeResult, error) {
	body, _ := json.Marshal(req)
	b, err := r.c.Post(ctx, "purge", body)
	if err != nil {
		return nil, err
	}
	var res purgeResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("POST /log/purge: %w", err)
	}
	return &res, nil
}
