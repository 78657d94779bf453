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
	evidence := fs.String("evidence", "", "file to write fork evidence to (default: <data>/evidence/<time>-<kind>-<origin hash>.json)")
	every := fs.Duration("every", 0, "check again at this interval until interrupted (default: once)")
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
	}
	for {
		res, err := pull.Check(ctx, opts)
		if err != nil {
			if res == nil || res.Evidence == nil {
				return fmt.Errorf("checking %s: %w", *logURL, err)
			}
			path := *evidence
			if path != "" {
				err = writeNewFile(path, res.Evidence.Marshal(), 0o644)
			} else {
				path, err = writeEvidence(filepath.Join(*data, "evidence"), res.Evidence)
			}
			if err != nil {
				fmt.Fprintf(stdout, "%s\n", res.Evidence.Marshal())
				return fmt.Errorf("%s: %s; writing the evidence failed (%v), so it is printed above", res.Evidence.Kind, res.Evidence.Detail, err)
			}
			if res.Evidence.Kind == witness.EvidenceFork {
				return fmt.Errorf("FORK: %s. The log's key signed two checkpoints that cannot both be true; the evidence is in %s (check it with the log's key alone)", res.Evidence.Detail, path)
			}
			return fmt.Errorf("ROLLBACK: %s. Both signed checkpoints are in %s", res.Evidence.Detail, path)
		}
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
		if *every <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}
