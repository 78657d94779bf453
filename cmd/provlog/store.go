package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/durable"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/logpg"
)

// Where the log lives. By default, Pebble in <data>/db: one sidecar per
// data dir. With store: postgres://… (or --store), PostgreSQL: any number
// of sidecars, each with its own data dir holding copies of the same log
// keys, serve one log, and PostgreSQL alone orders their commits (see
// log/logpg). The keys never go into the database; tokens, anchor and
// witness state stay in each data dir. Payload blobs go to the log's
// database, so that every sidecar reads them and a purge is one.

// defaultScrubInterval is serve's scrub_interval unless configured.
const defaultScrubInterval = time.Second

// The sidecar's Pebble sizes. Pebble reserves its memtables (up to two)
// out of the block cache, and under serve the background scrub keeps the
// rest of the cache full, so the cache size is what Pebble holds at
// steady state. logpebble's defaults (a 24 MiB cache, 8 MiB memtables)
// left 8 MiB for blocks and put 16 MiB in memtables; these leave the same
// 8 MiB for blocks and 4 MiB in memtables, which Pebble flushes four times
// as often (a 2 MiB flush every few seconds under the issue-12 load). In
// proxybench (HTTP, 32 sessions, 17,000 calls) the sidecar's anonymous
// memory peaked at 33.7 MiB against 44.7 with the defaults, and its CPU per
// call did not move beyond the run's noise (tools/bench/README.md).
const (
	sidecarCacheSize    = 12 << 20
	sidecarMemTableSize = 2 << 20
)

// openLogStore opens the log store cfg names.
func openLogStore(ctx context.Context, cfg *Config, logger *slog.Logger) (log.Storage, error) {
	if cfg.Store == "" {
		scrub := defaultScrubInterval
		if cfg.ScrubInterval != nil {
			scrub = *cfg.ScrubInterval
		}
		store, err := logpebble.Open(filepath.Join(cfg.Data, dbDir), &logpebble.Options{
			Logf:          func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...), "component", "pebble") },
			Errorf:        func(format string, args ...any) { logger.Error(fmt.Sprintf(format, args...), "component", "pebble") },
			ScrubInterval: scrub,
			CacheSize:     sidecarCacheSize,
			MemTableSize:  sidecarMemTableSize,
		})
		if errors.Is(err, logpebble.ErrLocked) {
			return nil, fmt.Errorf("data dir %s is %w", cfg.Data, errDataDirHeld)
		}
		return store, err
	}
	if !strings.HasPrefix(cfg.Store, "postgres://") && !strings.HasPrefix(cfg.Store, "postgresql://") {
		return nil, fmt.Errorf("store %q: want a PostgreSQL URL, postgres://user@host:port/database (or no store: Pebble in the data dir)", logpg.Where(cfg.Store))
	}
	store, err := logpg.Open(ctx, cfg.Store, &logpg.Options{
		Logf:   func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...), "component", "postgres") },
		Errorf: func(format string, args ...any) { logger.Error(fmt.Sprintf(format, args...), "component", "postgres") },
	})
	if err != nil {
		return nil, fmt.Errorf("opening the log in PostgreSQL: %w", err)
	}
	// Say in the data dir where its log is, so that commands given --data
	// do not read an empty (or an old) Pebble store in its place.
	if err := durable.WriteFile(filepath.Join(cfg.Data, sharedStoreFile), []byte(logpg.Where(cfg.Store)+"\n"), 0o600); err != nil {
		store.Close()
		return nil, fmt.Errorf("recording the shared store in %s: %w", cfg.Data, err)
	}
	return store, nil
}

// sharedStoreFile, in a data dir, names the PostgreSQL log its sidecar
// serves, as logpg.Where does: no user, no password.
const sharedStoreFile = "shared-store"

// sharedStoreOf returns the shared log a data dir's sidecar serves, or ""
// if its log is the Pebble store in it.
func sharedStoreOf(data string) string {
	b, err := os.ReadFile(filepath.Join(data, sharedStoreFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
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

// openCommandStore opens the log a command given --data reads or writes:
// the shared log in PostgreSQL when its config names one (storeURL, the
// config's store:), else the data dir's Pebble store (openStore, which
// refuses a data dir whose sidecar serves a shared log).
func openCommandStore(ctx context.Context, data, storeURL string, readOnly bool) (log.Storage, error) {
	if storeURL == "" {
		s, err := openStore(data, readOnly)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if !strings.HasPrefix(storeURL, "postgres://") && !strings.HasPrefix(storeURL, "postgresql://") {
		return nil, fmt.Errorf("store %q: want a PostgreSQL URL, postgres://user@host:port/database", logpg.Where(storeURL))
	}
	opts := &logpg.Options{ReadOnly: readOnly}
	if readOnly {
		// The reading commands read the stored nodes, every one: audit
		// compares them with the tree it recomputes. A handle that keeps
		// the tree in memory hashes its lowest levels from the leaves
		// and never reads those rows, corrupt or missing.
		opts.MaxHotNodes = -1
	}
	s, err := logpg.Open(ctx, storeURL, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the shared log in PostgreSQL: %w", err) // which names where
	}
	return s, nil
}

// configStore is the store: of the config at path ("" without a config).
func configStore(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return "", err
	}
	return cfg.Store, nil
}

// openBlobs opens the payload blobs of the log in store: the shared log's
// table when it is in PostgreSQL (so that every sidecar reads what any of
// them stored, and a purge through one deletes for all), else the data
// dir's. Blobs a sidecar of a shared log kept in its data dir before the
// log's table held them are still read from there, and purged from both.
func openBlobs(data string, store any) (*blobs.Store, error) {
	local, err := blobs.Open(filepath.Join(data, blobDir))
	if err != nil {
		return nil, err
	}
	ps, ok := store.(*logpg.Store)
	if !ok {
		return local, nil
	}
	return blobs.New(sharedBlobs{shared: ps.Blobs(), local: local}), nil
}

// sharedBlobs is a shared log's blobs, with those of the data dir from
// before beneath them.
type sharedBlobs struct{ shared, local *blobs.Store }

func (b sharedBlobs) ReadBlob(name string) ([]byte, error) {
	d, err := b.shared.Get(name)
	if errors.Is(err, blobs.ErrNotFound) {
		if ok, lerr := b.local.Has(name); lerr != nil {
			return nil, lerr
		} else if ok {
			return b.local.Get(name)
		}
	}
	return d, err
}

func (b sharedBlobs) WriteBlob(_ string, data []byte) error {
	_, err := b.shared.Put(data)
	return err
}

func (b sharedBlobs) DeleteBlob(name string) error {
	return errors.Join(b.shared.Purge(name), b.local.Purge(name))
}

// Shared says the other sidecars of the log write and delete these too.
func (sharedBlobs) Shared() bool { return true }

func (b sharedBlobs) HasBlob(name string) (bool, error) {
	if ok, err := b.shared.Has(name); err != nil || ok {
		return ok, err
	}
	return b.local.Has(name)
}

// openStore opens a data dir's Pebble store for a command, and says what
// to do when a running sidecar holds it. Commands that only read open it
// read-only, so that they work, and write nothing, on a full or read-only
// disk.
func openStore(data string, readOnly bool) (*logpebble.Store, error) {
	if shared := sharedStoreOf(data); shared != "" {
		return nil, fmt.Errorf("the log of data dir %s is not in it: its sidecar serves the shared log in PostgreSQL (%s), which --data does not read; ask any of that log's running sidecars with --log http://ADDR", data, logpg.Where(shared))
	}
	if _, err := os.Stat(filepath.Join(data, dbDir)); err != nil {
		return nil, fmt.Errorf("no log in %s (looked for %s)", data, filepath.Join(data, dbDir))
	}
	s, err := logpebble.Open(filepath.Join(data, dbDir), &logpebble.Options{ReadOnly: readOnly})
	if errors.Is(err, logpebble.ErrLocked) {
		return nil, fmt.Errorf("data dir %s is held by a running provlog sidecar; ask it over HTTP instead with --log http://ADDR: %w", data, err)
	}
	return s, err
}
