package main

// Live config: a running sidecar rereads its config file when it changes
// (checked every reload_interval, applied once it has not changed for one
// interval) or on SIGHUP. Tokens, readers and
// handoff_any_actor take effect for the next request; sessions stay up.
// Servers under servers: are added, removed, and replaced by a new
// instance when their entry changed (reloadServers, on a goroutine of its own, so that a
// drain never holds up the next reload); the others keep running
// untouched.
// Everything else needs a restart, and the sidecar says which keys.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/provlog/provlog/proxy"
)

// DefaultReloadInterval is how often a sidecar checks its config file for
// changes (config reload_interval; 0s: only on SIGHUP).
const DefaultReloadInterval = 2 * time.Second

// configWatch is what a reload compares against.
type configWatch struct {
	path string
	// file is the config as its file was when the sidecar started, before
	// serve's flags changed it: what a reload's restart keys are found
	// against.
	file *Config
	// flagged names the keys serve's flags set (data, store,
	// verify_on_open), so that a change there in the file means nothing.
	flagged map[string]bool
	sum     [sha256.Size]byte
	// seen is the changed content a tick last saw: it is applied when
	// the next tick sees it unchanged, so a file caught half-written (an
	// empty config is a valid one, without servers or tokens) is not.
	seen [sha256.Size]byte
	// servers takes the newest servers: list to a goroutine of its own,
	// which applies it (a removed server drains for up to drain_timeout):
	// tokens revoked by a later reload must not wait for that drain.
	servers chan []proxy.ServerConfig
}

// wantServers hands want to the servers' goroutine, in place of a list
// it has not taken yet: the servers converge on the newest config.
func (w *configWatch) wantServers(want []proxy.ServerConfig) {
	for {
		select {
		case w.servers <- want:
			return
		default:
			select {
			case <-w.servers: // an older list not applied yet
			default:
			}
		}
	}
}

// watchConfig reloads the config on SIGHUP (hup) and when the file's
// bytes change, until ctx is done.
func (s *sidecar) watchConfig(ctx context.Context, w *configWatch, hup <-chan os.Signal) {
	if b, err := os.ReadFile(w.path); err == nil {
		w.sum = sha256.Sum256(b)
	}
	var tick <-chan time.Time
	iv := DefaultReloadInterval
	if s.cfg.ReloadInterval != nil {
		iv = *s.cfg.ReloadInterval
	}
	if iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	w.servers = make(chan []proxy.ServerConfig, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case want := <-w.servers:
				s.reloadServers(want)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s.reloadConfig(w, "SIGHUP")
		case <-tick:
			b, err := os.ReadFile(w.path)
			if err != nil || bytes.Equal(w.sum[:], sumOf(b)) {
				continue
			}
			if sum := sha256.Sum256(b); sum != w.seen {
				w.seen = sum // changed since the last tick: wait until it holds still
				continue
			}
			s.reloadConfig(w, "file changed")
		}
	}
}

func sumOf(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// reloadConfig rereads the config and applies what can change while
// running. A config that does not load changes nothing.
func (s *sidecar) reloadConfig(w *configWatch, why string) {
	b, err := os.ReadFile(w.path)
	if err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		return
	}
	w.sum = sha256.Sum256(b)
	if len(bytes.TrimSpace(b)) == 0 {
		// At start an empty file is the defaults; here it is a file
		// caught between its truncation and its writing, and would drop
		// every token and server. `servers: []` empties on purpose.
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why,
			"err", "the config file is empty (being written?); write it whole, then reload")
		return
	}
	// The bytes read, not the file again: what was summed is what loads.
	cfg, err := parseConfig(w.path, b)
	if err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		return
	}
	h, err := ensureLocalToken(s.cfg.Data)
	if err == nil {
		// loadConfig held the tokens to the local.token of the file's data
		// dir, which --data may have replaced with another.
		err = cfg.checkTokenHashes(h)
	}
	if err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		return
	}
	// local.token stays the running stdio actor's: a changed actor:
	// needs a restart, like the stdio sessions that act as it.
	live := *cfg
	live.Actor = s.cfg.Actor
	if cfg.Auth.Reserves(live.Actor) {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why,
			"err", fmt.Sprintf("the running actor %q is in an auth: issuer's actor namespace (its actor_prefix)", live.Actor))
		return
	}
	// The running data dir's issuers of the past (--data may name
	// another than the file's), and this config's from now on.
	err = live.checkPastNamespaces(s.cfg.Data)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), namespaceWriteTimeout)
		err = s.ns.record(ctx, cfg.Auth, s.nsLog())
		cancel()
	}
	if err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		return
	}
	// Joining serves are told the hash of the local.token taken here
	// before it acts, and the one before again if the reload fails.
	prev := s.joinFile.token()
	if err := s.joinFile.setToken(h); err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		return
	}
	if err := s.authn.Reload(cfg.Auth); err != nil {
		s.logger.Error("config reload failed; the running config stays", "config", w.path, "trigger", why, "err", err)
		if err := s.joinFile.setToken(prev); err != nil {
			s.logger.Error("config reload: joining stdio serves are refused until a reload or restart succeeds", "err", err)
		}
		return
	}
	s.tokens.set(newTokens(&live, h))
	var issuers []string
	if cfg.Auth != nil {
		for _, is := range cfg.Auth.Issuers {
			issuers = append(issuers, is.Issuer)
		}
	}
	s.logger.Info("config reloaded", "config", w.path, "trigger", why, "actors", len(cfg.Actors), "readers", len(cfg.Readers),
		"auth_issuers", issuers, "handoff_any_actor", cfg.HandoffAnyActor)
	w.wantServers(cfg.Servers)
	if keys := restartKeys(w.file, cfg, w.flagged); len(keys) > 0 {
		s.logger.Warn("config keys changed that take effect only after a restart; the running values stay", "config", w.path, "keys", keys)
	}
}

// restartKeys names the config keys whose change a reload does not
// apply: every key but those it applies (reloaded), those serve's flags
// set (flagged), and the witness keys, which are compared as decoded
// (their YAML nodes carry line numbers).
func restartKeys(old, cfg *Config, flagged map[string]bool) []string {
	reloaded := map[string]bool{"actors": true, "readers": true, "handoff_any_actor": true, "auth": true,
		"servers": true, "witnesses": true, "witness_policy": true}
	for k, on := range flagged {
		reloaded[k] = reloaded[k] || on
	}
	var keys []string
	a, b := reflect.ValueOf(old).Elem(), reflect.ValueOf(cfg).Elem()
	for i := range a.NumField() {
		f := a.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" || reloaded[key] {
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			keys = append(keys, key)
		}
	}
	if !reflect.DeepEqual(old.Witnesses, cfg.Witnesses) {
		keys = append(keys, "witnesses")
	}
	if !reflect.DeepEqual(old.WitnessPolicy, cfg.WitnessPolicy) {
		keys = append(keys, "witness_policy")
	}
	return keys
}

// reloadServers makes the proxy's servers those of want: a server no
// longer listed is removed, a new one added, one whose entry changed is
// replaced by a new instance without refusing its calls (the old one
// finishes those under way, new ones wait for the new one to start); the
// ones removed or replaced drain side by side, so the reload waits one
// drain_timeout at most. One that cannot be added or changed (its prefix
// is another's) is reported and left out, or left as it was; the others
// go on.
func (s *sidecar) reloadServers(want []proxy.ServerConfig) {
	running := s.proxy.ServerConfigs()
	var removed, added, restarted []string
	var changed []proxy.ServerConfig
	for _, old := range running {
		if !slices.ContainsFunc(want, func(c proxy.ServerConfig) bool { return c.ID == old.ID }) {
			removed = append(removed, old.ID)
		}
	}
	for _, c := range want {
		i := slices.IndexFunc(running, func(r proxy.ServerConfig) bool { return r.ID == c.ID })
		if i >= 0 && !reflect.DeepEqual(running[i], c) {
			changed = append(changed, c)
			restarted = append(restarted, c.ID)
		}
	}
	// All at once: they drain side by side, within one drain_timeout.
	if err := s.proxy.ChangeServers(removed, changed); err != nil {
		s.logger.Error("config reload: removing or changing servers", "removed", removed, "changed", restarted, "err", err)
	}
	for _, c := range want {
		if slices.ContainsFunc(running, func(r proxy.ServerConfig) bool { return r.ID == c.ID }) {
			continue
		}
		if err := s.proxy.AddServer(c); err != nil {
			s.logger.Error("config reload: a server could not be added; it is not served", "server", c.ID, "err", err)
			continue
		}
		added = append(added, c.ID)
	}
	if len(removed)+len(added)+len(restarted) > 0 {
		s.logger.Info("config reload: servers changed", "added", added, "removed", removed, "restarted", restarted)
	}
}
