package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/proxy/authn"
)

// On a shared log the actor namespaces are the log's: another sidecar's
// issuer maps OAuth actors into one, and this sidecar must refuse a
// static token whose id is in it, though its own config never named that
// issuer. A sidecar configured with an issuer writes a namespace entry
// for it before it takes the issuer's first token (claimNamespaces). So
// each sidecar reads, twice a second, the entries any sidecar committed
// since it last looked (namespacesFromLog): namespace entries, and the
// OAuth actors of logs written before them. It adds the prefixes they
// tell to the data dir's authNamespacesFile, and refuses from then on the
// static tokens whose actor is in one (namespaces.reserves); a config
// that names such an actor is refused at start and on reload
// (checkPastNamespaces), as for the issuers once configured here.
//
// What the log does not tell is not reserved: an issuer of an older
// provlog, which wrote no namespace entry, whose actors are mapped from
// another claim than sub (warnUnknownNamespaces).

// namespacesFollowEvery is how often a sidecar of a shared log reads the
// entries committed since it last looked for OAuth actors' namespaces.
const namespacesFollowEvery = 500 * time.Millisecond

// namespacesWait is how long a sidecar that wrote a namespace entry to a
// shared log waits before the issuer's tokens act (claimNamespaces), and
// how old every sidecar's last read of the log's namespaces may be while
// it takes static tokens and its stdio actor (namespaces.lag): so one
// that read the log within namespacesWait has read every namespace entry
// whose issuer's tokens act.
const namespacesWait = 2 * time.Second

// namespaceWriteTimeout bounds a reload's reading of the log for static
// actors' entries in the namespaces of the issuers it adds, and its wait
// for the log to commit their namespace entries (and, on a shared log,
// for the other sidecars to read them: claimNamespaces).
const namespaceWriteTimeout = 30 * time.Second

// namespacesReadNote is how many entries read with no new namespace in
// them the file's read size may lag behind.
const namespacesReadNote = 1 << 16

// namespaces is the sidecar's view of authNamespacesFile: the prefixes
// static tokens are refused in, and the one writer of the file while the
// sidecar runs.
type namespaces struct {
	data   string
	logger *slog.Logger
	mu     sync.Mutex // held while the file is read and written
	taken  atomic.Pointer[[]string]
	// logged holds the prefixes a namespace entry in the log was seen
	// for, or written, since the sidecar started (claimNamespaces).
	logged map[string]bool
	read   uint64 // the entries [0, read) were read (the file may say less)
	// On a shared log: when the last read of its namespaces that
	// succeeded began (or, before one did, when the sidecar began
	// following it), and whether the sidecar said it
	// refuses static actors for their lag.
	shared atomic.Bool
	store  atomic.Value // the log.SharedStorage
	readAt atomic.Pointer[time.Time]
	warned atomic.Bool
}

// load reads the prefixes the data dir's file lists.
func (n *namespaces) load() error {
	l, err := readNamespaces(n.data)
	if err != nil {
		return err
	}
	n.taken.Store(&l.prefixes)
	n.read = max(n.read, l.read)
	return nil
}

// reserves reports whether actor is in a reserved namespace. On a
// shared log, current must have said the view of them is current.
func (n *namespaces) reserves(actor string) bool {
	p := n.taken.Load()
	if p == nil {
		return false
	}
	for _, ns := range *p {
		if authn.InNamespace(actor, ns) {
			return true
		}
	}
	return false
}

// current makes the sidecar's view of a shared log's namespaces at
// most namespacesWait old, reading the log now if it is older (its
// follower held up: a stalled process, a slow or failing store), and
// returns 0, or how old the view is when that read failed too. A sidecar
// adding an issuer lets its tokens act namespacesWait after its
// namespace entry is in, so an older view may miss it: static tokens and
// the stdio actor do not act on one. The first time it is too old, the
// sidecar says so.
func (n *namespaces) current() time.Duration {
	if !n.shared.Load() || n.age() <= namespacesWait {
		return 0
	}
	st, _ := n.store.Load().(log.SharedStorage)
	ctx, cancel := context.WithTimeout(context.Background(), namespacesWait)
	err := n.catchUp(ctx, st)
	cancel()
	d := n.age()
	if err == nil && d <= namespacesWait {
		return 0
	}
	if n.warned.CompareAndSwap(false, true) {
		n.logger.Error("this sidecar cannot read the shared log's OAuth actor namespaces, and its view of them is older than a sidecar adding an issuer waits; static tokens and the stdio actor are refused until it can", "last_read_ago", d.Round(time.Millisecond).String(), "wait", namespacesWait.String(), "err", err)
	}
	return d
}

// age is how long ago the last read of the shared log's namespaces that
// succeeded began.
func (n *namespaces) age() time.Duration {
	at := n.readAt.Load()
	if at == nil {
		return 0 // not following a shared log
	}
	return time.Since(*at)
}

// record reserves auth's issuers' namespaces not reserved yet
// (claimNamespaces).
// On a shared log the wait for the other sidecars is not under n.mu,
// so that the follower keeps reading the log meanwhile (namespaces.lag).
func (n *namespaces) record(ctx context.Context, auth *authn.Config, lg nsLog) error {
	n.mu.Lock()
	settle, err := claimNew(ctx, n.data, auth, lg, n.logged, n.logger)
	if err == nil {
		err = n.load()
	}
	n.mu.Unlock()
	if err != nil || settle == nil {
		return err
	}
	return settle(ctx)
}

// follow reads what the sidecars of the shared log st commit, until ctx
// ends (catchUp).
func (n *namespaces) follow(ctx context.Context, st log.SharedStorage) {
	t := time.NewTicker(namespacesFollowEvery)
	defer t.Stop()
	failing := false // said once, not every second the store is away
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := n.catchUp(ctx, st)
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			n.logger.Warn("reading the shared log for OAuth actors' namespaces failed; trying again twice a second", "err", err)
		case err == nil && failing:
			n.logger.Info("reading the shared log for OAuth actors' namespaces works again")
		}
		failing = err != nil
	}
}

// catchUp reads the entries committed since the file's read size, and
// adds the namespaces of the OAuth actors they name.
func (n *namespaces) catchUp(ctx context.Context, st log.SharedStorage) error {
	began := time.Now()
	if !n.shared.Load() {
		n.store.Store(st)
		n.readAt.CompareAndSwap(nil, &began)
		n.shared.Store(true)
	}
	latest, err := st.Latest(ctx)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if latest.Size <= n.read {
		n.readNow(began)
		return nil
	}
	prefixes, logged, unknown, err := namespacesFromLog(ctx, st, n.read, latest.Size)
	if err != nil {
		return err
	}
	for _, p := range logged {
		n.logged[p] = true
	}
	n.read = latest.Size
	warnUnknownNamespaces(n.logger, unknown)
	l, err := readNamespaces(n.data)
	if err != nil {
		return err
	}
	added := l.add(prefixes...)
	if added {
		n.logger.Warn("the shared log names OAuth actors in namespaces not reserved here before; static tokens whose actor is in one are refused from now on", "namespaces", printable(l.prefixes))
	} else if n.read-l.read < namespacesReadNote {
		n.readNow(began)
		return nil // read again from l.read after a restart
	}
	l.read = n.read
	if err := writeNamespaces(n.data, l); err != nil {
		return err
	}
	if err := n.load(); err != nil {
		return err
	}
	n.readNow(began)
	return nil
}

// readNow records that a read of the shared log's namespaces that began
// at began succeeded.
func (n *namespaces) readNow(began time.Time) {
	n.readAt.Store(&began)
	if n.warned.Swap(false) {
		n.logger.Info("this sidecar reads the shared log's OAuth actor namespaces again; static tokens and the stdio actor act again")
	}
}

// printable returns ps each through log.Printable.
func printable(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = log.Printable(p)
	}
	return out
}

// static looks a static token up (tokens.static), refusing one whose
// actor is in an OAuth issuer's namespace the log holds actors of, though
// no config here names the issuer (namespaces).
func (s *sidecar) static(token string) (actor string, reader, ok bool) {
	actor, reader, ok = s.tokens.static(token)
	if ok && (s.ns.current() > 0 || s.ns.reserves(actor)) {
		return "", false, false
	}
	return actor, reader, ok
}
