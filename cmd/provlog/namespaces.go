package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/proxy/authn"
)

// authNamespacesFile, in the data dir, lists the actor_prefix of every
// auth: issuer ever configured on it, and on a shared log of every issuer
// whose actors the log names, whichever sidecar mapped them: one quoted
// prefix a line, and a line "read N" when the entries [0, N) of the log
// were read for them. The log holds those issuers' actors' entries and
// tasks after a reload or a new config drops the issuer, so their
// namespaces stay theirs: a static actor in one would act as them
// (checkPastNamespaces, and the static tokens' lookup).
const authNamespacesFile = "auth-namespaces"

// nsList is authNamespacesFile's contents.
type nsList struct {
	prefixes []string
	read     uint64 // the log's entries [0, read) were read for prefixes
	found    bool   // the file exists
}

// readNamespaces reads the data dir's authNamespacesFile (empty and not
// found when there is none yet).
func readNamespaces(data string) (nsList, error) {
	path := filepath.Join(data, authNamespacesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nsList{}, nil
	}
	if err != nil {
		return nsList{}, err
	}
	l := nsList{found: true}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSuffix(line, "\n")
		if n, ok := strings.CutPrefix(line, "read "); ok {
			if l.read, err = strconv.ParseUint(n, 10, 64); err != nil {
				return nsList{}, fmt.Errorf("%s: a read line's size: %w", path, err)
			}
			continue
		}
		p, err := strconv.Unquote(line)
		if err != nil {
			return nsList{}, fmt.Errorf("%s: a line is not a quoted actor prefix: %w", path, err)
		}
		l.prefixes = append(l.prefixes, p)
	}
	return l, nil
}

// pastNamespaces returns the prefixes authNamespacesFile lists (none
// when there is no such file yet).
func pastNamespaces(data string) ([]string, error) {
	l, err := readNamespaces(data)
	return l.prefixes, err
}

// add adds the prefixes ps not listed yet, and reports whether there were
// any.
func (l *nsList) add(ps ...string) bool {
	n := len(l.prefixes)
	for _, p := range ps {
		if !slices.Contains(l.prefixes, p) {
			l.prefixes = append(l.prefixes, p)
		}
	}
	return len(l.prefixes) > n
}

// writeNamespaces writes the data dir's authNamespacesFile.
func writeNamespaces(data string, l nsList) error {
	var b strings.Builder
	for _, p := range l.prefixes {
		b.WriteString(strconv.Quote(p) + "\n")
	}
	if l.read > 0 {
		fmt.Fprintf(&b, "read %d\n", l.read)
	}
	return durable.WriteFile(filepath.Join(data, authNamespacesFile), []byte(b.String()), 0o600)
}

// checkPastNamespaces refuses a static actor id (actor:, actors:,
// readers:) in the namespace of an issuer once configured on the data
// dir data ([authn.InNamespace]: any case).
func (c *Config) checkPastNamespaces(data string) error {
	past, err := pastNamespaces(data)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ids := []string{c.Actor}
	for _, t := range slices.Concat(c.Actors, c.Readers) {
		ids = append(ids, t.ID)
	}
	for _, id := range ids {
		for _, p := range past {
			if authn.InNamespace(id, p) {
				return fmt.Errorf("config: static actor %q is in the actor namespace %q of an auth: issuer once configured on this data dir or reserved on its shared log (%s): the log holds its actors' entries and tasks, which a static token of that id would act as; give it another id", id, p, filepath.Join(data, authNamespacesFile))
			}
		}
	}
	return nil
}

// namespacesFromLog returns the actor prefixes of the OAuth actors the
// entries [from, size) of src name (an entry's actor beside an auth
// member): an actor is the issuer's prefix and the token's sub, or
// ClientNamespace and the client id. unknown counts, by issuer, the
// actors mapped from another claim (an email), whose prefix the entries
// do not tell: the auth member keeps iss and sub, not that claim.
// Namespace entries' prefixes are among prefixes, and alone in logged.
func namespacesFromLog(ctx context.Context, src entryReader, from, size uint64) (prefixes, logged []string, unknown map[string]int, err error) {
	const chunk = 4096
	seen := map[string]bool{}
	for start := from; start < size; start += chunk {
		es, err := src.Entries(ctx, start, min(size, start+chunk))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading the log's entries from %d: %w", start, err)
		}
		for _, b := range es {
			var e struct {
				Kind  string `json:"kind"`
				Actor string `json:"actor"`
				Auth  *struct {
					Iss      string `json:"iss"`
					Sub      string `json:"sub"`
					ClientID string `json:"client_id"`
				} `json:"auth"`
			}
			if json.Unmarshal(b, &e) != nil {
				continue
			}
			if e.Kind == log.KindNamespace {
				if p, ok := reservedBy(b); ok && !slices.Contains(logged, p) {
					logged = append(logged, p)
					if !slices.Contains(prefixes, p) {
						prefixes = append(prefixes, p)
					}
				}
				continue
			}
			if e.Auth == nil || seen[e.Actor] {
				continue
			}
			seen[e.Actor] = true
			var p string
			var ok bool
			if p, ok = strings.CutSuffix(e.Actor, authn.ClientNamespace+e.Auth.ClientID); !ok || e.Auth.ClientID == "" {
				p, ok = strings.CutSuffix(e.Actor, e.Auth.Sub)
			}
			switch {
			case !ok || e.Auth.Sub == "" || p == "":
				if unknown == nil {
					unknown = map[string]int{}
				}
				unknown[e.Auth.Iss]++
			case !slices.Contains(prefixes, p):
				prefixes = append(prefixes, p)
			}
		}
	}
	return prefixes, logged, unknown, nil
}

// reservedBy returns the actor prefix namespace entry b reserves.
func reservedBy(b []byte) (string, bool) {
	e, err := log.ParseEntry(b)
	if err != nil {
		return "", false
	}
	n, err := log.ParseNamespaceEntry(e)
	if err != nil {
		return "", false
	}
	return n.ActorPrefix, true
}

// reserveNamespaces makes the data dir's authNamespacesFile list the
// actor prefixes of auth's issuers (claimNamespaces, which writes their
// namespace entries), and first those the log's entries reserve (a
// namespace entry) or name an OAuth actor of: the whole log's when there
// is no such file yet (an older provlog's data dir), and on a shared log
// (shared) those written since it was last read, by any sidecar. Then it
// holds cfg's static actors to them (checkPastNamespaces).
func reserveNamespaces(ctx context.Context, cfg *Config, lg nsLog, logged map[string]bool, logger *slog.Logger) error {
	size, err := lg.size(ctx)
	if err != nil {
		return fmt.Errorf("reading the log's size: %w", err)
	}
	src, shared := lg.entryReader, lg.shared
	l, err := readNamespaces(cfg.Data)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if (!l.found || shared) && size > l.read {
		if !l.found {
			logger.Info("reading the log once for the actor namespaces of the OAuth issuers it names", "entries", size)
		}
		prefixes, inLog, unknown, err := namespacesFromLog(ctx, src, l.read, size)
		if err != nil {
			return err
		}
		for _, p := range inLog {
			logged[p] = true
		}
		warnUnknownNamespaces(logger, unknown)
		// Written even when none were found: the log is read for them once.
		l.add(prefixes...)
		l.read = size
		if err := writeNamespaces(cfg.Data, l); err != nil {
			return err
		}
	}
	if err := cfg.checkPastNamespaces(cfg.Data); err != nil {
		return err
	}
	if err := claimNamespaces(ctx, cfg.Data, cfg.Auth, lg, logged, logger); err != nil {
		return fmt.Errorf("reserving the auth: issuers' actor namespaces: %w", err)
	}
	return nil
}

// warnUnknownNamespaces says which issuers' actors the log names with no
// prefix it can tell (namespacesFromLog), and what the operator can do.
func warnUnknownNamespaces(logger *slog.Logger, unknown map[string]int) {
	if len(unknown) == 0 {
		return
	}
	var issuers []string
	n := 0
	for iss, k := range unknown {
		issuers = append(issuers, log.Printable(iss))
		n += k
	}
	slices.Sort(issuers)
	logger.Warn("the log names OAuth actors mapped from another claim than sub (an actor_claim such as email); its entries do not record that claim, so their issuer's actor_prefix cannot be read from the log and their namespace is not reserved here unless their issuer is configured: add a line with the prefix, quoted (\"kc:\"), to the data dir's "+authNamespacesFile+" file, or configure the issuer once",
		"actors", n, "issuers", issuers)
}
