package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
)

// maxEvidenceFile bounds what verify-fork reads: evidence holds two
// checkpoints and a proof of at most 64 hashes, a few KiB.
const maxEvidenceFile = 1 << 20

// runVerifyFork checks an evidence file that serve or check wrote, with
// nothing but the log's verifier keys (every key the log has used, for a
// log that rotated its key): exit 0 only when it proves a fork.
func runVerifyFork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify-fork", stderr)
	var vkeys cli.Strings
	fs.Var(&vkeys, "vkey", "the log's verifier key, or a file holding it (repeat for each key the log has used)")
	if err := cli.ParseFlags(fs, args, 1); err != nil {
		return err
	}
	if len(vkeys) == 0 {
		return usageErr("--vkey is required")
	}
	vs := make([]note.Verifier, len(vkeys))
	for i, a := range vkeys {
		v, err := parseLogVerifier(a)
		if err != nil {
			return err
		}
		vs[i] = v
	}
	path := fs.Arg(0)
	b, err := readBounded(path, maxEvidenceFile)
	if err != nil {
		return err
	}
	ev, err := witness.ParseEvidence(b)
	if err != nil {
		return fmt.Errorf("%s: %w", log.Printable(path), err)
	}
	if err := ev.Verify(vs...); err != nil {
		what := "does not prove a fork"
		if ev.Kind == witness.EvidenceRollback {
			what = "is rollback evidence, which alone proves no fork"
		}
		return fmt.Errorf("FAILED: %s %s: %s", log.Printable(path), what, log.Printable(err.Error()))
	}
	fmt.Fprintf(stdout, "OK: %s proves a fork of %s: its key signed two checkpoints no append-only log could both have signed (%s)\n",
		log.Printable(path), log.Printable(ev.Origin), log.Printable(ev.Detail))
	return nil
}

// readBounded reads the file at path, refusing one over max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errors.New(log.Printable(path) + ": over " + fmt.Sprint(max) + " bytes; not evidence this command wrote")
	}
	return b, nil
}
