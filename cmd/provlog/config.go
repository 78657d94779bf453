package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy"
	"github.com/provlog/provlog/proxy/authn"
)

// Config is the sidecar's YAML configuration (DESIGN §4).
type Config struct {
	// Data is the data dir (default provlog-data beside the config file,
	// or ./provlog-data without one). Like every path in the file, a
	// relative one is relative to the config file's directory, not to the
	// directory provlog was started in.
	Data string `yaml:"data"`
	// Origin names the log when the data dir is first created.
	Origin string `yaml:"origin"`
	// Store keeps the log in PostgreSQL instead of Pebble in the data
	// dir: a postgres:// connection string. Any number of sidecars, each
	// with its own data dir holding the same log keys, may serve one log
	// (see store.go).
	Store string `yaml:"store"`
	// Actor is the actor of stdio clients and the owner of local.token
	// (default "local"). This id, and those under actors:, readers: and
	// retention.purgers, may not be provlog's own (log.ReservedActor).
	Actor string `yaml:"actor"`
	// Actors map HTTP bearer tokens, stored as hex SHA-256, to actors.
	Actors []TokenConfig `yaml:"actors"`
	// Readers hold read-only tokens for the log API's entry contents.
	Readers []TokenConfig `yaml:"readers"`
	// Auth trusts identity providers' OAuth access tokens beside the
	// static tokens (see package authn for its shape); nil: static only.
	Auth *authn.Config `yaml:"auth"`
	// PublicEntries serves entry bundles, entries and proofs without a token.
	PublicEntries bool `yaml:"public_entries"`
	// HandoffAnyActor lets handoff_task name actors the config does not
	// list, for deployments whose actors are known elsewhere. Without it,
	// once actors: lists any or auth: trusts an issuer, a handoff is refused
	// unless actors: lists its recipient or an issuer's actor_prefix
	// begins the recipient's id.
	HandoffAnyActor bool `yaml:"handoff_any_actor"`
	// CommitDelay bounds how long a commit under load waits for the
	// entries of tool calls under way (default 2ms; 0s: never waits).
	CommitDelay *time.Duration `yaml:"commit_delay"`
	// VerifyOnOpen makes serve read every block of the Pebble store when
	// it starts (as audit --data does), so that corruption is found then,
	// not by the first proof that meets it: the log then serves reads but
	// takes no calls, and /healthz says "corrupt".
	VerifyOnOpen bool `yaml:"verify_on_open"`
	// ScrubInterval is how often the Pebble store reads its next slice
	// (1 MiB) in the background, so that a corrupt block nothing reads is
	// found without waiting for a read or a write (default 1s; 0s: no
	// scrub). /healthz and /metrics report its progress.
	ScrubInterval *time.Duration `yaml:"scrub_interval"`

	// ReloadInterval is how often the running sidecar checks this file
	// for changes to apply (actors, readers, auth, handoff_any_actor,
	// servers; see reload.go); default 2s, 0s: only on SIGHUP.
	ReloadInterval *time.Duration `yaml:"reload_interval"`

	// Retention purges retained payloads in the background and says who
	// may purge through the running sidecar (purge.go).
	Retention RetentionConfig `yaml:"retention"`

	// Log says how the sidecar logs to stderr (logging.go).
	Log LogConfig `yaml:"log"`

	// Health tunes what /healthz calls degraded.
	Health HealthConfig `yaml:"health"`

	// OTel exports a span per recorded MCP request and log API request
	// over OTLP (otel.go); nil: no traces.
	OTel *OTelConfig `yaml:"otel"`

	// Sessions limit the HTTP front's stateful MCP sessions.
	Sessions SessionsConfig `yaml:"sessions"`
	// Parking bounds the calls of 2026-07-28 clients parked on an older
	// server's request while the client answers it (proxy, park.go).
	Parking ParkingConfig `yaml:"parking"`
	// Subscriptions bound the front sessions' resource subscriptions.
	Subscriptions SubscriptionsConfig `yaml:"subscriptions"`

	// Servers are the downstream MCP servers the proxy fronts.
	Servers []proxy.ServerConfig `yaml:"servers"`
	// DrainTimeout bounds how long a server removed by a reload keeps
	// its calls in flight before they are cancelled (default 30s); its
	// names leave the front at once and new calls for it are refused.
	DrainTimeout time.Duration `yaml:"drain_timeout"`

	// Anchors configures external anchoring (DESIGN §6); nil: none.
	Anchors *online.Config `yaml:"anchors"`
	// dir is the config file's directory: relative paths in the file
	// (data, a server's dir and command, anchors' files) are relative to it.
	dir string

	// Witnesses cosign the log's checkpoints, as WitnessPolicy asks (see
	// witness_sidecar.go).
	Witnesses     []WitnessConfig     `yaml:"witnesses"`
	WitnessPolicy WitnessPolicyConfig `yaml:"witness_policy"`
}

// SessionsConfig limits the HTTP front's stateful MCP sessions; zero
// values take proxy.DefaultMaxSessions and proxy.DefaultSessionIdle.
type SessionsConfig struct {
	// Max caps the open sessions; an initialize beyond it gets 503.
	Max int `yaml:"max"`
	// PerActor caps one actor's open sessions (default a quarter of
	// Max, at least 1), so that one token cannot hold them all.
	PerActor int `yaml:"per_actor"`
	// Idle closes a session after this long without a request.
	Idle time.Duration `yaml:"idle"`
}

// ParkingConfig bounds parked calls; zero values take
// proxy.DefaultMaxParkedCalls and proxy.DefaultParkTimeout.
type ParkingConfig struct {
	// Max caps the calls parked at once; a server's request beyond it
	// gets an error at once.
	Max int `yaml:"max"`
	// PerActor caps one actor's parked calls (default a quarter of Max,
	// at least 1).
	PerActor int `yaml:"per_actor"`
	// Timeout bounds how long a parked call waits for its client's retry;
	// then the server's request gets an error.
	Timeout time.Duration `yaml:"timeout"`
}

// SubscriptionsConfig bounds the resource subscriptions the front's
// sessions hold (a URI counted once per session); zero values take
// proxy.DefaultMaxSubscriptions, a quarter of it per actor and
// proxy.DefaultSubscriptionsPerSession. A subscription beyond them is
// refused.
type SubscriptionsConfig struct {
	Max        int `yaml:"max"`
	PerActor   int `yaml:"per_actor"`
	PerSession int `yaml:"per_session"`
}

// TokenConfig maps one token to an actor id.
type TokenConfig struct {
	ID          string `yaml:"id"`
	TokenSHA256 string `yaml:"token_sha256"`
}

// loadConfig reads and checks the config file at path ("": the
// defaults).
func loadConfig(path string) (*Config, error) {
	var text []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
		text = b
	}
	return parseConfig(path, text)
}

// parseConfig checks text as the config file at path, as loadConfig
// does: token add holds an edited config to it before writing it, so that
// it never leaves a file the sidecar refuses.
func parseConfig(path string, text []byte) (*Config, error) {
	cfg := &Config{dir: "."}
	if path != "" {
		cfg.dir = filepath.Dir(path)
		if err := cli.DecodeYAML(text, cfg); err != nil && !errors.Is(err, io.EOF) { // an empty file is the defaults
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if cfg.Data == "" {
		cfg.Data = "provlog-data"
	}
	cfg.Data = cfg.path(cfg.Data)
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		if s.Dir != "" {
			s.Dir = cfg.path(s.Dir)
		}
		// A program named by a path (not looked up in PATH) is found
		// beside the config, wherever the client starts provlog.
		if len(s.Command) > 0 && strings.ContainsRune(s.Command[0], filepath.Separator) {
			s.Command[0] = cfg.path(s.Command[0])
		}
	}
	if cfg.Actor == "" {
		cfg.Actor = "local"
	}
	if err := cfg.checkCaps(); err != nil {
		return nil, err
	}
	if cfg.Anchors != nil {
		if _, err := cfg.Anchors.Resolve(configReader(cfg.dir)); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	if _, err := newLogger(io.Discard, cfg.Log); err != nil {
		return nil, err
	}
	if err := cfg.OTel.check(); err != nil {
		return nil, err
	}
	if err := cfg.checkWitnesses(); err != nil {
		return nil, err
	}
	if err := proxy.CheckServers(cfg.Servers); err != nil {
		return nil, fmt.Errorf("config: servers: %w", err)
	}
	if err := cfg.loadAuth(); err != nil {
		return nil, err
	}
	if err := checkActorID(cfg.Actor); err != nil && cfg.Actor != "" {
		return nil, fmt.Errorf("config: actor: %w", err)
	}
	for _, l := range []struct {
		key  string
		list []TokenConfig
	}{{"actors", cfg.Actors}, {"readers", cfg.Readers}} {
		for i, t := range l.list {
			if t.ID == "" {
				return nil, errors.New("config: a token entry has no id")
			}
			if err := checkActorID(t.ID); err != nil {
				return nil, fmt.Errorf("config: %s[%d].id: %w", l.key, i, err)
			}
			if cfg.Auth.Reserves(t.ID) {
				return nil, fmt.Errorf("config: static actor %q is in an auth: issuer's actor namespace (its actor_prefix); give it another id", t.ID)
			}
			if h, err := hex.DecodeString(t.TokenSHA256); err != nil || len(h) != sha256.Size {
				return nil, fmt.Errorf("config: token_sha256 of %q must be 64 hex digits (the SHA-256 of the token, never the token)", t.ID)
			}
		}
	}
	if err := cfg.checkLookAlikes(); err != nil {
		return nil, err
	}
	if err := cfg.checkTokenHashes(localTokenHash(cfg.Data)); err != nil {
		return nil, err
	}
	if err := cfg.checkPastNamespaces(cfg.Data); err != nil {
		return nil, err
	}
	// A purger no token could act as is a mistake the operator should
	// hear of now, not when purge --log is refused.
	for i, id := range cfg.Retention.Purgers {
		if err := checkActorID(id); err != nil {
			return nil, fmt.Errorf("config: retention.purgers[%d]: %w", i, err)
		}
	}
	return cfg, nil
}

// checkLookAlikes refuses two different actor ids (actor: and actors:)
// that a reader takes for one (authn.Skeleton): entries, provlog tasks and
// the UI would show the calls and tasks of one as the other's.
func (c *Config) checkLookAlikes() error {
	first := map[string]string{}
	ids := []string{c.Actor}
	for _, t := range c.Actors {
		ids = append(ids, t.ID)
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		sk := authn.Skeleton(id)
		if other, ok := first[sk]; ok && other != id {
			return fmt.Errorf("config: actors %q and %q read as the same id (look-alike letters, accents, case or composed and decomposed forms); a reader of the log could take one for the other: give one another id", other, id)
		}
		first[sk] = id
	}
	return nil
}

// checkTokenHashes refuses a token_sha256 listed twice, under actors:,
// readers: or as local.token's (localHash, "" when there is none yet): a
// token acts as the first entry of its hash, so the second one's id would
// never act, and the log would name the first for the calls the operator
// meant for it.
func (c *Config) checkTokenHashes(localHash string) error {
	owner := map[string]string{}
	if localHash != "" {
		owner[localHash] = fmt.Sprintf("actor %q (local.token in %s)", c.Actor, c.Data)
	}
	for _, l := range []struct {
		key  string
		list []TokenConfig
	}{{"actors", c.Actors}, {"readers", c.Readers}} {
		for i, t := range l.list {
			h := strings.ToLower(t.TokenSHA256)
			this := fmt.Sprintf("%s[%d] %q", l.key, i, t.ID)
			if first, ok := owner[h]; ok {
				return fmt.Errorf("config: %s has the token_sha256 of %s: one token acts as one actor; give each its own token (provlog token add)", this, first)
			}
			owner[h] = this
		}
	}
	return nil
}

// checkActorID refuses a static token's actor id no client should act as
// (authn.CheckActor).
func checkActorID(id string) error {
	return authn.CheckActor(id, opp.MaxActor)
}

// loadAuth checks the auth: section and reads its introspection client
// secrets.
func (c *Config) loadAuth() error {
	if c.Auth == nil {
		return nil
	}
	if err := c.Auth.Check(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.Auth.Reserves(c.Actor) {
		return fmt.Errorf("config: actor %q is in an auth: issuer's actor namespace (its actor_prefix); give it another id", c.Actor)
	}
	for i := range c.Auth.Issuers {
		in := c.Auth.Issuers[i].Introspection
		if in == nil || in.ClientSecretFile == "" {
			continue
		}
		b, err := os.ReadFile(c.path(in.ClientSecretFile))
		if err != nil {
			return fmt.Errorf("config: auth: reading the introspection client secret: %w", err)
		}
		in.ClientSecret = string(bytes.TrimSpace(b))
	}
	return nil
}

// path resolves a path written in the config file against the file's
// directory.
func (c *Config) path(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.dir, p)
}

// tokens maps bearer tokens, kept only as SHA-256, to actors. It is safe
// for concurrent use; a config reload replaces its contents (set).
type tokens struct {
	mu      sync.RWMutex
	entries []tokenEntry
	// openHandoff: handoff_task may name any actor (no actors and no
	// auth: issuers are configured, or handoff_any_actor is set).
	openHandoff bool
}

// newTokens returns the tokens of a config: the local actor's (localHash)
// and those under actors: and readers:.
func newTokens(cfg *Config, localHash string) *tokens {
	tk := &tokens{openHandoff: len(cfg.Actors) == 0 && !cfg.Auth.Enabled() || cfg.HandoffAnyActor}
	tk.add(localHash, cfg.Actor, false)
	for _, a := range cfg.Actors {
		tk.add(a.TokenSHA256, a.ID, false)
	}
	for _, r := range cfg.Readers {
		tk.add(r.TokenSHA256, r.ID, true)
	}
	return tk
}

// set replaces t's contents with o's.
func (t *tokens) set(o *tokens) {
	o.mu.RLock()
	entries, open := o.entries, o.openHandoff
	o.mu.RUnlock()
	t.mu.Lock()
	t.entries, t.openHandoff = entries, open
	t.mu.Unlock()
}

type tokenEntry struct {
	hash   [sha256.Size]byte
	actor  string
	reader bool // may read the log, but is no actor
}

func (t *tokens) add(hexHash, actor string, reader bool) {
	var e tokenEntry
	h, _ := hex.DecodeString(hexHash)
	copy(e.hash[:], h)
	e.actor, e.reader = actor, reader
	t.mu.Lock()
	t.entries = append(t.entries, e)
	t.mu.Unlock()
}

// lookup returns the entry of a presented token. It hashes the token and
// compares it with every stored hash in constant time, without stopping
// early, so timing reveals neither the token nor which entry matched.
func (t *tokens) lookup(token string) (tokenEntry, bool) {
	h := sha256.Sum256([]byte(token))
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found tokenEntry
	ok := 0
	for _, e := range t.entries {
		m := subtle.ConstantTimeCompare(h[:], e.hash[:])
		if m == 1 && ok == 0 {
			found = e
		}
		ok |= m
	}
	return found, ok == 1
}

// mayReceiveHandoff reports whether handoff_task may name id: any actor
// when handoffs are open, else one a token (not a reader's) acts as.
func (t *tokens) mayReceiveHandoff(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.openHandoff {
		return true
	}
	for _, e := range t.entries {
		if !e.reader && e.actor == id {
			return true
		}
	}
	return false
}

// lookAlike returns the configured actor (a static token's, not a
// reader's) that id reads as without being it (authn.Skeleton), if any.
func (t *tokens) lookAlike(id string) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	sk := authn.Skeleton(id)
	for _, e := range t.entries {
		if !e.reader && e.actor != id && authn.Skeleton(e.actor) == sk {
			return e.actor, true
		}
	}
	return "", false
}

// static is t as the authenticator looks static tokens up.
func (t *tokens) static(token string) (actor string, reader, ok bool) {
	e, ok := t.lookup(token)
	return e.actor, e.reader, ok
}

// ensureLocalToken returns the local actor's token hash, making the token file
// (0600) on first start.
func ensureLocalToken(data string) (string, error) {
	path := filepath.Join(data, localToken)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return "", err
		}
		b = []byte(base64.RawURLEncoding.EncodeToString(raw))
		if err := durable.CreateFile(path, append(b, '\n'), 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", path, err)
		}
	} else if err != nil {
		return "", err
	}
	return hashLocalToken(b), nil
}

// localTokenHash returns the hash of the data dir's local.token, or ""
// when it cannot be read (not made yet: serve makes a random one, which
// no configured hash can equal).
func localTokenHash(data string) string {
	b, err := os.ReadFile(filepath.Join(data, localToken))
	if err != nil {
		return ""
	}
	return hashLocalToken(b)
}

func hashLocalToken(b []byte) string {
	h := sha256.Sum256(bytes.TrimSpace(b))
	return hex.EncodeToString(h[:])
}

// checkCaps refuses a negative cap, and an actor's or session's share
// larger than the cap it is a share of.
func (c *Config) checkCaps() error {
	caps := []struct {
		key, of string
		n, max  int
	}{
		{"sessions.max", "", c.Sessions.Max, 0},
		{"sessions.per_actor", "sessions.max", c.Sessions.PerActor, cmp.Or(c.Sessions.Max, proxy.DefaultMaxSessions)},
		{"parking.max", "", c.Parking.Max, 0},
		{"parking.per_actor", "parking.max", c.Parking.PerActor, cmp.Or(c.Parking.Max, proxy.DefaultMaxParkedCalls)},
		{"subscriptions.max", "", c.Subscriptions.Max, 0},
		{"subscriptions.per_actor", "subscriptions.max", c.Subscriptions.PerActor, cmp.Or(c.Subscriptions.Max, proxy.DefaultMaxSubscriptions)},
		{"subscriptions.per_session", "subscriptions.max", c.Subscriptions.PerSession, cmp.Or(c.Subscriptions.Max, proxy.DefaultMaxSubscriptions)},
	}
	for _, m := range caps {
		switch {
		case m.n < 0:
			return fmt.Errorf("config: %s: %d is negative (leave it out, or 0, for the default)", m.key, m.n)
		case m.of != "" && m.n > m.max:
			return fmt.Errorf("config: %s: %d is more than %s (%d), which it is a share of; make it at most that", m.key, m.n, m.of, m.max)
		}
	}
	return nil
}
