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

	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/proxy/authn"
)

// authNamespacesFile, in the data dir, lists the actor_prefix of every
// auth: issuer ever configured on it, one quoted prefix a line. The log
// holds those issuers' actors' entries and tasks after a reload or a new
// config drops the issuer, so their namespaces stay theirs: a static
// actor in one would act as them (checkPastNamespaces).
const authNamespacesFile = "auth-namespaces"

// pastNamespaces returns the prefixes authNamespacesFile lists (none
// when there is no such file yet).
func pastNamespaces(data string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(data, authNamespacesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		p, err := strconv.Unquote(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return nil, fmt.Errorf("%s: a line is not a quoted actor prefix: %w", filepath.Join(data, authNamespacesFile), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// recordNamespaces adds the actor prefixes of auth's issuers to the data
// dir's authNamespacesFile, before a config naming them takes effect.
func recordNamespaces(data string, auth *authn.Config) error {
	if !auth.Enabled() {
		return nil
	}
	past, err := pastNamespaces(data)
	if err != nil {
		return err
	}
	all := slices.Clone(past)
	for _, is := range auth.Issuers {
		if !slices.Contains(all, is.ActorPrefix) {
			all = append(all, is.ActorPrefix)
		}
	}
	if len(all) == len(past) {
		return nil
	}
	return writeNamespaces(data, all)
}

// writeNamespaces writes the data dir's authNamespacesFile.
func writeNamespaces(data string, prefixes []string) error {
	var b strings.Builder
	for _, p := range prefixes {
		b.WriteString(strconv.Quote(p) + "\n")
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
				return fmt.Errorf("config: static actor %q is in the actor namespace %q of an auth: issuer once configured on this data dir (%s): the log holds its actors' entries and tasks, which a static token of that id would act as; give it another id", id, p, filepath.Join(data, authNamespacesFile))
			}
		}
	}
	return nil
}

// namespacesFromLog returns the actor prefixes of the OAuth actors the
// entries [0, size) of src name (an entry's actor beside an auth member),
// for a data dir an older provlog left without authNamespacesFile: an
// actor is the issuer's prefix and the token's sub, or ClientNamespace
// and the client id. unknown counts the actors mapped from another claim
// (an email), whose prefix the entries do not tell.
func namespacesFromLog(ctx context.Context, src entryReader, size uint64) (prefixes []string, unknown int, err error) {
	const chunk = 4096
	seen := map[string]bool{}
	for start := uint64(0); start < size; start += chunk {
		es, err := src.Entries(ctx, start, min(size, start+chunk))
		if err != nil {
			return nil, 0, fmt.Errorf("reading the log's entries from %d: %w", start, err)
		}
		for _, b := range es {
			var e struct {
				Actor string `json:"actor"`
				Auth  *struct {
					Sub      string `json:"sub"`
					ClientID string `json:"client_id"`
				} `json:"auth"`
			}
			if json.Unmarshal(b, &e) != nil || e.Auth == nil || seen[e.Actor] {
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
				unknown++
			case !slices.Contains(prefixes, p):
				prefixes = append(prefixes, p)
			}
		}
	}
	return prefixes, unknown, nil
}

// reserveNamespaces makes the data dir's authNamespacesFile list the
// actor prefixes of auth's issuers, and first, when there is no such
// file yet, those of the OAuth actors the log's entries name; then it
// holds cfg's static actors to them (checkPastNamespaces).
func reserveNamespaces(ctx context.Context, cfg *Config, src entryReader, size uint64, logger *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(cfg.Data, authNamespacesFile)); errors.Is(err, fs.ErrNotExist) && size > 0 {
		logger.Info("reading the log once for the actor namespaces of the OAuth issuers it names", "entries", size)
		prefixes, unknown, err := namespacesFromLog(ctx, src, size)
		if err != nil {
			return err
		}
		if unknown > 0 {
			logger.Warn("the log names OAuth actors whose issuer's actor_prefix it does not tell (mapped from another claim than sub); their namespaces are not reserved unless their issuer is configured", "actors", unknown)
		}
		// Written even when empty: the log is read for them once.
		if err := writeNamespaces(cfg.Data, prefixes); err != nil {
			return err
		}
	}
	if err := cfg.checkPastNamespaces(cfg.Data); err != nil {
		return err
	}
	if err := recordNamespaces(cfg.Data, cfg.Auth); err != nil {
		return fmt.Errorf("recording the auth: issuers' actor namespaces: %w", err)
	}
	return nil
}
