package main

import (
	"errors"
	"fmt"
	"io/fs"
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
	var b strings.Builder
	for _, p := range all {
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
