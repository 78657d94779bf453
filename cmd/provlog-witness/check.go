package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/pull"
	"github.com/provlog/provlog/witness/witnesspebble"
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr)
	logURL := fs.String("log", "", "the log's tlog-tiles URL prefix (a provlog sidecar's base URL works too)")
	vkeyArg := fs.String("vkey", "", "the log's verifier key, or a file holding it")
	data := fs.String("data", "", "directory keeping the checkpoints this command recorded")
	origin := fs.String("origin", "", "the log's origin (default: the verifier key's name)")
	evidence := fs.String("evidence", "", "file to write fork evidence to (default: <data>/evidence/<origin hash>-<kind>-<checkpoints hash>.json)")
	every := fs.Duration("every", 0, "check again at this interval until interrupted, through failed checks, until a fork or a rollback (default: once)")
	maxStale := fs.Duration("max-stale", pull.DefaultMaxStale, "how long the log may serve only checkpoints older than the recorded one before a check fails")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *logURL == "" || *vkeyArg == "" || *data == "" {
		return usageErr("--log, --vkey and --data are required")
	}
	v, err := parseLogVerifier(*vkeyArg)
	if err != nil {
		return err
	}
	kv, err := witnesspebble.Open(filepath.Join(*data, "db"))
	if errors.Is(err, witnesspebble.ErrLocked) {
		return fmt.Errorf("data dir %s is in use by another provlog-witness", *data)
	}
	if err != nil {
		return err
	}
	defer kv.Close()
	opts := pull.Options{
		URL:      *logURL,
		Verifier: v,
		Origin:   *origin,
		Store:    witness.KVStore(kv),
		Client:   &http.Client{Timeout: 30 * time.Second},
		MaxStale: *maxStale,
	}
	var failed error // the last check's failure, while checking --every
	for {
		res, err := pull.Check(ctx, opts)
		switch {
		case err != nil && res != nil && res.Evidence != nil:
			return reportEvidence(res.Evidence, *evidence, *data, stdout)
		case err != nil && ctx.Err() != nil:
			return failed // interrupted mid-check
		case err != nil && *every <= 0:
			return fmt.Errorf("checking %s: %w", *logURL, err)
		case err != nil:
			// A log that blinks (a restart, a network fault) must not
			// end the watch: a forking log would only have to blink once.
			// Only a fork or a rollback stops it.
			failed = fmt.Errorf("checking %s: %w", *logURL, err)
			fmt.Fprintf(stderr, "provlog-witness: %v; checking again in %s\n", failed, *every)
		default:
			failed = nil
			reportOK(stdout, res)
		}
		if *every <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			// Interrupted: the exit says whether the last check failed.
			return failed
		case <-time.After(*every):
		}
	}
}

// reportEvidence writes the evidence of a fork or a rollback to path (by
// default a new file under <data>/evidence), or prints it if that fails,
// and returns the error the command ends with.
func reportEvidence(ev *witness.Evidence, path, data string, stdout io.Writer) error {
	var err error
	if path != "" {
		err = writeNewFile(path, ev.Marshal(), 0o644)
	} else {
		path, err = writeEvidence(filepath.Join(data, "evidence"), ev)
	}
	if err != nil {
		fmt.Fprintf(stdout, "%s\n", ev.Marshal())
		return fmt.Errorf("%s: %s; writing the evidence failed (%v), so it is printed above", ev.Kind, ev.Detail, err)
	}
	if ev.Kind == witness.EvidenceFork {
		return fmt.Errorf("FORK: %s. The log's key signed two checkpoints that cannot both be true; the evidence is in %s (check it with the log's key alone)", ev.Detail, path)
	}
	return fmt.Errorf("ROLLBACK: %s. Both signed checkpoints are in %s", ev.Detail, path)
}

// reportOK prints what a check that found nothing wrong saw.
func reportOK(stdout io.Writer, res *pull.Result) {
	c := res.Current
	switch {
	case res.Previous == nil:
		fmt.Fprintf(stdout, "OK: %s at size %d, recorded (first check)\n", c.Origin, c.Size)
	case res.Recorded:
		fmt.Fprintf(stdout, "OK: %s grew from size %d to %d consistently, recorded\n", c.Origin, res.Previous.Size, c.Size)
	case res.Stale:
		fmt.Fprintf(stdout, "OK: %s served an older checkpoint (size %d) consistent with the recorded size %d; nothing recorded\n", c.Origin, c.Size, res.Previous.Size)
	default:
		fmt.Fprintf(stdout, "OK: %s unchanged at size %d\n", c.Origin, c.Size)
	}
}
