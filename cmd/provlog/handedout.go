package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
)

// checkHandedOut checks the log in store against every checkpoint of it
// that left the process and that the data dir holds outside the store:
// the anchor records, the newest cosigned checkpoint, the newest one a
// sidecar on a shared store showed, the newest /log/checkpoint served,
// and, for a shared store, the newest
// of the data dir's own Pebble log. (The store checks
// its own published-batch record when it opens.) It returns how many it
// checked, and a *log.LostError when the store is shorter than one of them
// or has another root at its size: serving on would fork the log.
func checkHandedOut(ctx context.Context, data string, store log.Storage, v note.Verifier) (int, error) {
	type leftProcess struct {
		src string
		cp  []byte
	}
	var all []leftProcess
	if _, err := os.Stat(filepath.Join(data, anchorDir)); err == nil {
		records, err := anchor.OpenStore(filepath.Join(data, anchorDir))
		if err != nil {
			return 0, err
		}
		list, err := records.List()
		if err != nil {
			return 0, fmt.Errorf("reading anchor records: %w", err)
		}
		for _, st := range list {
			if st.Record != nil { // audit reports records that do not parse
				all = append(all, leftProcess{"anchor record " + filepath.Join(anchorDir, st.Name), []byte(st.Record.Checkpoint)})
			}
		}
	}
	if c, err := os.ReadFile(filepath.Join(data, cosignedFile)); err == nil {
		all = append(all, leftProcess{"the witnesses' cosigned checkpoint " + cosignedFile, c})
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	// The newest checkpoint a sidecar on a shared store showed (shown.go).
	if c, err := shownOut.read(data); err != nil {
		return 0, err
	} else if c != nil {
		all = append(all, leftProcess{"the newest checkpoint this data dir's sidecar showed (handed-out.0, handed-out.1)", c})
	}
	if c, err := servedOut.read(data); err != nil {
		return 0, err
	} else if c != nil {
		all = append(all, leftProcess{"the newest checkpoint this data dir's /log/checkpoint served (served.0, served.1)", c})
	}
	// A shared store must hold the data dir's own log, if it ever had
	// one: that log's checkpoints were handed out under the same key.
	if _, own := store.(*logpebble.Store); !own {
		if c, err := logpebble.NewestPublished(filepath.Join(data, dbDir)); err != nil {
			return 0, err
		} else if c != nil {
			all = append(all, leftProcess{"the data dir's own log (" + dbDir + "/: move it aside only if its history is to be given up)", c})
		}
	}
	for i, h := range all {
		if err := server.CheckHandedOut(ctx, store, v, h.src, h.cp); err != nil {
			return i, err
		}
	}
	return len(all), nil
}

// checkStoreOnOpen is what serve checks of a store before serving it:
// never sign a fork (the store, Pebble or PostgreSQL, holds every
// checkpoint the data dir says was handed out; a Pebble store checked its
// own published record on opening), and, for Pebble with verify_on_open,
// every block reads back. A corrupt
// block fails the store (Err), which the sequencer and /healthz report;
// reads of the rest go on.
func checkStoreOnOpen(ctx context.Context, cfg *Config, store log.Storage, v note.Verifier, logger *slog.Logger) error {
	if _, err := checkHandedOut(ctx, cfg.Data, store, v); err != nil {
		where := "in " + cfg.Data
		if cfg.Store != "" {
			// A shared log: this data dir's anchors and cosigned
			// checkpoint left the process too, and the shared tree
			// must hold them as much as a Pebble one.
			where = "shared by the sidecars of " + cfg.Data
		}
		return fmt.Errorf("refusing to serve the log %s: %w", where, err)
	}
	ps, ok := store.(*logpebble.Store)
	if !ok || !cfg.VerifyOnOpen {
		return nil
	}
	rep, err := ps.Verify(ctx)
	if err != nil {
		logger.Error("verifying the log store", "err", err)
	} else {
		logger.Info("verified the log store", "keys", rep.Keys, "bytes", rep.Bytes)
	}
	for _, w := range rep.Warnings {
		logger.Warn("log store", "warning", w)
	}
	return nil
}
