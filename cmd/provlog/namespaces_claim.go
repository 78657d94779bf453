package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/proxy/authn"
)

// appendFunc appends an entry to the log (the sequencer's Append).
type appendFunc func(context.Context, []byte) (*log.Receipt, error)

// nsLog is the log as the namespaces' reservation reads and writes it.
type nsLog struct {
	entryReader
	// size returns how many entries the log holds, committed by any
	// sidecar of a shared log.
	size   func(context.Context) (uint64, error)
	append appendFunc
	shared bool // other sidecars write the log too
}

// nsLog returns the sidecar's log for the namespaces' reservation.
func (s *sidecar) nsLog() nsLog {
	lg := nsLog{entryReader: s.store, append: s.seq.Append,
		size: func(context.Context) (uint64, error) { return s.size(), nil }}
	if sh, ok := s.store.(log.SharedStorage); ok {
		lg.shared = true
		lg.size = func(ctx context.Context) (uint64, error) {
			st, err := sh.Latest(ctx)
			return st.Size, err
		}
	}
	return lg
}

// claimNamespaces reserves the actor namespaces of auth's issuers that
// the data dir's authNamespacesFile does not list yet, before a config
// naming them takes effect.
//
// A static actor (actors:, actor:, readers:) may have written entries in
// such a namespace while no issuer held it; the issuer's actor of that id
// would act as them, their tasks and all. So the log is read for them
// first (the entries since the last such read: staticActorsFile keeps
// what it found), and if there are any the config is refused and
// nothing is written to the log. Then a namespace entry for each issuer goes into the log, so
// every sidecar of the log reserves it from then on (and an auditor sees
// when it was taken), and the file lists it. On a shared log the other
// sidecars take a moment to read it (settleNamespaces); static entries
// they wrote in it meanwhile, or between the reading and the namespace
// entries, cannot be refused any more: they are warned of.
//
// On a shared log a prefix the file lists already (from an older
// provlog, which wrote no namespace entries) gets a namespace entry too,
// once a run, unless the log was seen to hold one (logged, which it
// updates): the other sidecars learn of it from nothing else.
func claimNamespaces(ctx context.Context, data string, auth *authn.Config, lg nsLog, logged map[string]bool, logger *slog.Logger) error {
	settle, err := claimNew(ctx, data, auth, lg, logged, logger)
	if err != nil || settle == nil {
		return err
	}
	return settle(ctx)
}

// claimNew is claimNamespaces up to the wait on a shared log: settle,
// when not nil, waits for the other sidecars and reads what static
// actors wrote meanwhile. It touches no file the shared log's follower
// writes (namespaces.catchUp), which may read the log while it waits.
func claimNew(ctx context.Context, data string, auth *authn.Config, lg nsLog, logged map[string]bool, logger *slog.Logger) (settle func(context.Context) error, err error) {
	if !auth.Enabled() {
		return nil, nil
	}
	l, err := readNamespaces(data)
	if err != nil {
		return nil, err
	}
	var fresh, again []authn.IssuerConfig
	var prefixes []string
	for _, is := range auth.Issuers {
		switch p := is.ActorPrefix; {
		case slices.Contains(prefixes, p):
		case !slices.Contains(l.prefixes, p):
			fresh = append(fresh, is)
			prefixes = append(prefixes, p)
		case lg.shared && !logged[p]:
			again = append(again, is)
		}
	}
	for _, is := range again {
		if _, err := writeNamespaceEntry(ctx, lg, is); err != nil {
			return nil, err
		}
		logged[is.ActorPrefix] = true
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	size, err := lg.size(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log's size: %w", err)
	}
	seen, err := readStaticActors(data)
	if err != nil {
		return nil, err
	}
	if seen.read > size {
		seen = staticActors{} // another log's: read this one whole
	}
	if err := seen.scan(ctx, lg, size); err != nil {
		return nil, err
	}
	if err := writeStaticActors(data, seen); err != nil {
		return nil, err
	}
	found := seen.in(prefixes)
	if found.n > 0 {
		return nil, fmt.Errorf("issuer %s, actor_prefix %q: the log holds %d entries by static actors (actors:, actor:) in that namespace, written while no issuer held it (the first: entry %d, by %q); the issuer's actor of that id would act as them, their tasks and all: give the issuer another actor_prefix", found.issuer(fresh), found.prefix, found.n, found.first, found.actor)
	}
	var end uint64 // the namespace entries are below end
	for _, is := range fresh {
		r, err := writeNamespaceEntry(ctx, lg, is)
		if err != nil {
			return nil, err
		}
		logged[is.ActorPrefix] = true
		end = r.Index + 1
	}
	l.add(prefixes...)
	if err := writeNamespaces(data, l); err != nil {
		return nil, err
	}
	if !lg.shared {
		return nil, nil
	}
	return func(ctx context.Context) error {
		return settleNamespaces(ctx, data, lg, seen, fresh, prefixes, end, logger)
	}, nil
}

// settleNamespaces waits namespacesWait for the other sidecars of the
// shared log to read the namespace entries below end, then reads the
// entries committed since seen.read for static actors in prefixes, and
// says so if any wrote one (claimNamespaces).
func settleNamespaces(ctx context.Context, data string, lg nsLog, seen staticActors, fresh []authn.IssuerConfig, prefixes []string, end uint64, logger *slog.Logger) error {
	wait := namespacesWait
	logger.Info("reserved new OAuth issuers' actor namespaces on the shared log; waiting until every sidecar of it has read them before their actors act", "namespaces", printable(prefixes), "wait", wait)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
	}
	latest, err := lg.size(ctx)
	if err != nil {
		return fmt.Errorf("reading the log's size: %w", err)
	}
	// None of seen's actors is in prefixes: what is, now, was written
	// since its last read.
	if err := seen.scan(ctx, lg, latest); err != nil {
		return err
	}
	if err := writeStaticActors(data, seen); err != nil {
		return err
	}
	if found := seen.in(prefixes); found.n > 0 {
		logger.Error("another sidecar of the shared log let a static actor write in a namespace this sidecar was reserving, before that sidecar read the reservation; the entries stay in the log, and the issuer's actor of that id acts as them, their tasks and all", "issuer", found.issuer(fresh), "actor_prefix", found.prefix, "entries", found.n, "first", found.first, "actor", log.Printable(found.actor), "namespace_entries_end", end)
	}
	return nil
}

// writeNamespaceEntry appends the namespace entry of issuer is.
func writeNamespaceEntry(ctx context.Context, lg nsLog, is authn.IssuerConfig) (*log.Receipt, error) {
	b, err := (&log.NamespaceEntry{Time: time.Now(), Issuer: is.Issuer, ActorPrefix: is.ActorPrefix}).Marshal()
	var r *log.Receipt
	if err == nil {
		r, err = lg.append(ctx, b)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the log's namespace entry for issuer %s (actor_prefix %q): %w", is.Issuer, is.ActorPrefix, err)
	}
	return r, nil
}

// nsFound is what staticActors.in found: n entries by static actors in
// the namespaces, the first at index first, by actor, in prefix.
type nsFound struct {
	n             int
	first         uint64
	actor, prefix string
}

// issuer returns the issuer of f's prefix among issuers.
func (f nsFound) issuer(issuers []authn.IssuerConfig) string {
	for _, is := range issuers {
		if is.ActorPrefix == f.prefix {
			return is.Issuer
		}
	}
	return ""
}

// staticActorsFile, in the data dir, is what reading the log for static
// actors' entries found (staticActors): a line "read N" when the
// entries [0, N) were read, then a line for each static actor that wrote
// one of them: the index of its first entry, how many it wrote, and its
// id, quoted. An issuer added later has the log's entries since N read,
// not all of them again. Removed, it is made again from the whole log.
const staticActorsFile = "auth-static-actors"

// staticActors is staticActorsFile's contents: the static actors that
// wrote entries [0, read) of the log.
type staticActors struct {
	read uint64
	by   map[string]*staticWrote
}

// staticWrote is where a static actor's entries are: the first, and how
// many.
type staticWrote struct {
	first uint64
	n     int
}

// readStaticActors reads the data dir's staticActorsFile (none read when
// there is none).
func readStaticActors(data string) (staticActors, error) {
	path := filepath.Join(data, staticActorsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return staticActors{}, nil
	}
	if err != nil {
		return staticActors{}, err
	}
	bad := func(why string) (staticActors, error) {
		return staticActors{}, fmt.Errorf("%s: %s (the file is what a read of the log for static actors found; remove it, and the log is read again whole)", path, why)
	}
	s := staticActors{by: map[string]*staticWrote{}}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	n, ok := strings.CutPrefix(lines[0], "read ")
	if s.read, err = strconv.ParseUint(n, 10, 64); !ok || err != nil {
		return bad("its first line is not \"read N\"")
	}
	for _, line := range lines[1:] {
		first, rest, _ := strings.Cut(line, " ")
		count, id, _ := strings.Cut(rest, " ")
		w := &staticWrote{}
		var err1, err2, err3 error
		w.first, err1 = strconv.ParseUint(first, 10, 64)
		w.n, err2 = strconv.Atoi(count)
		id, err3 = strconv.Unquote(id)
		if err1 != nil || err2 != nil || err3 != nil || w.n < 1 || w.first >= s.read || s.by[id] != nil {
			return bad(fmt.Sprintf("line %q is not an entry index, a count and a quoted actor id, once each", truncateLine(line)))
		}
		s.by[id] = w
	}
	return s, nil
}

// truncateLine shortens a line of a file for an error message.
func truncateLine(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// writeStaticActors writes the data dir's staticActorsFile.
func writeStaticActors(data string, s staticActors) error {
	var b strings.Builder
	fmt.Fprintf(&b, "read %d\n", s.read)
	ids := slices.Sorted(maps.Keys(s.by))
	for _, id := range ids {
		fmt.Fprintf(&b, "%d %d %s\n", s.by[id].first, s.by[id].n, strconv.Quote(id))
	}
	return durable.WriteFile(filepath.Join(data, staticActorsFile), []byte(b.String()), 0o600)
}

// scan reads the log's entries [s.read, to) for those no OAuth token
// wrote (no auth member) and the sidecar did not write as itself: a
// static token's, or a stdio client's; and adds their actors to s.
func (s *staticActors) scan(ctx context.Context, src entryReader, to uint64) error {
	const chunk = 4096
	if s.by == nil {
		s.by = map[string]*staticWrote{}
	}
	for start := s.read; start < to; start += chunk {
		es, err := src.Entries(ctx, start, min(to, start+chunk))
		if err != nil {
			return fmt.Errorf("reading the log's entries from %d: %w", start, err)
		}
		for i, b := range es {
			var e struct {
				Actor string          `json:"actor"`
				Auth  json.RawMessage `json:"auth"`
			}
			// The sidecar's own entries are no actor's an issuer could
			// map a token to (authn.ReservedActor).
			if json.Unmarshal(b, &e) != nil || e.Auth != nil || authn.ReservedActor(e.Actor) {
				continue
			}
			if w := s.by[e.Actor]; w != nil {
				w.n++
			} else {
				s.by[e.Actor] = &staticWrote{first: start + uint64(i), n: 1}
			}
		}
	}
	s.read = max(s.read, to)
	return nil
}

// in returns the entries of s's actors in one of the namespaces prefixes
// ([authn.InNamespace]).
func (s *staticActors) in(prefixes []string) nsFound {
	var f nsFound
	for id, w := range s.by {
		for _, p := range prefixes {
			if authn.InNamespace(id, p) {
				if f.n == 0 || w.first < f.first {
					f.first, f.actor, f.prefix = w.first, id, p
				}
				f.n += w.n
				break
			}
		}
	}
	return f
}
