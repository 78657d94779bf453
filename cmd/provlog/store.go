package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logpg"
)

// Where the log lives. By default, Pebble in <data>/db: one sidecar per
// data dir. With store: postgres://… (or --store), PostgreSQL: any number
// of sidecars, each with its own data dir holding copies of the same log
// keys, serve one log, and PostgreSQL alone orders their commits (see
// log/logpg). The keys never go into the database; blobs, tokens, anchor
// and witness state stay in each data dir.

// defaultScrubInterval is serve's scrub_interval unless configured.
const defaultScrubInterval = time.Second

// openLogStore opens the log store cfg names.
func openLogStore(ctx context.Context, cfg *Config, logger *slog.Logger) (log.Storage, error) {
	if cfg.Store == "" {
		scrub := defaultScrubInterval
		if cfg.ScrubInterval != nil {
			scrub = time.Duration(*cfg.ScrubInterval)
		}
		store, err := logpebble.Open(filepath.Join(cfg.Data, dbDir), &logpebble.Options{
			Logf:          func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...), "component", "pebble") },
			ScrubInterval: scrub,
		})
		if errors.Is(err, logpebble.ErrLocked) {
			return nil, fmt.Errorf("data dir %s is %w", cfg.Data, errDataDirHeld)
		}
		return store, err
	}
	if !strings.HasPrefix(cfg.Store, "postgres://") && !strings.HasPrefix(cfg.Store, "postgresql://") {
		return nil, fmt.Errorf("store %q: want a PostgreSQL URL, postgres://user@host:port/database (or no store: Pebble in the data dir)", redactURL(cfg.Store))
	}
	store, err := logpg.Open(ctx, cfg.Store, &logpg.Options{
		Logf: func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...), "component", "postgres") },
	})
	if err != nil {
		return nil, fmt.Errorf("opening the log in PostgreSQL: %w", err)
	}
	return store, nil
}

// redactURL drops a password from a connection URL, for messages.
func redactURL(s string) string {
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return s
	}
	cred := s[scheme+3 : at]
	if i := strings.Index(cred, ":"); i >= 0 {
		return s[:scheme+3] + cred[:i] + ":[redacted]" + s[at:]
	}
	return s
}

// LatestSize returns the log's size as last committed by any sidecar: the
// task engine reads up to it before deciding (opp.SharedLog).
func (l appendLog) LatestSize(ctx context.Context) (uint64, error) {
	if sh, ok := l.Storage.(log.SharedStorage); ok {
		st, err := sh.Latest(ctx)
		return st.Size, err
	}
	n, _ := l.Sequencer.Checkpoint()
	return n, nil
}
