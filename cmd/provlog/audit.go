package main

// provlog audit: the whole log checked from its entries.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy/replay"
)

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit", stderr)
	lf := addLogFlags(fs, "", "")
	lf.addVKey(fs, "verifier key to trust (default: the data dir's; required with --log)")
	cfgPath := fs.String("config", "", "config whose anchors: section pins the TSA roots and Rekor key (default: the records' own)")
	asJSON := fs.Bool("json", false, "print the verdict and every problem as one JSON object on stdout")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	out := checkOutput{json: *asJSON, stdout: stdout, stderr: stderr}
	a := &auditRun{logFlags: lf, cfgPath: *cfgPath, w: out.text(), stderr: stderr}
	err := a.run(ctx)
	if errors.Is(err, errUsage) {
		return err
	}
	return out.done(&a.rep, err, nil)
}

// auditRun is one provlog audit: what it was asked to check, and what it
// found so far (rep, the report --json prints).
type auditRun struct {
	*logFlags
	cfgPath   string
	w, stderr io.Writer // w: the lines for people
	rep       struct {
		Log     *log.AuditReport    `json:"log,omitempty"`
		Tasks   int                 `json:"tasks"`
		Keys    int                 `json:"fence_keys,omitempty"` // a shared log's provlog_keys rows checked
		Anchors *anchor.AuditReport `json:"anchors,omitempty"`
	}
}

func (a *auditRun) run(ctx context.Context) error {
	var src log.AuditSource
	vkey := a.vkey
	if a.data != "" {
		if vkey == "" {
			var err error
			path := filepath.Join(a.data, logVKeyFile)
			if vkey, err = readVKey(path); err != nil {
				return err
			}
			if _, err := note.NewVerifier(vkey); err != nil {
				return fmt.Errorf("%s is not a verifier key (%v); give the log's key with --vkey", path, err)
			}
		}
		s, err := a.openData(ctx, a.cfgPath)
		if errors.Is(err, log.ErrLost) || errors.Is(err, log.ErrCorrupt) {
			return fmt.Errorf("FAILED: %w", err)
		} else if err != nil {
			return err
		}
		defer s.Close()
		if err := verifyData(ctx, a.data, s, vkey, a.w); err != nil {
			return err
		}
		src = s
	} else {
		src = newRemote(a.url, a.token)
	}
	v, err := parseVerifier(vkey)
	if err != nil {
		return err
	}
	if nv, err := note.NewVerifier(vkey); err != nil || nv == nil {
		// vkey named a file: audit compares genesis with its contents.
		if vkey, err = readVKey(vkey); err != nil {
			return err
		}
	}
	rep, err := log.Audit(ctx, src, v, vkey)
	a.rep.Log = rep
	if err != nil {
		return fmt.Errorf("FAILED after %d entries and %d checkpoints: %w", rep.Entries, rep.Checkpoints, err)
	}
	tasks, err := opp.Rebuild(ctx, src, rep.Size)
	if err != nil {
		return fmt.Errorf("FAILED rebuilding task state: %w", err)
	}
	a.rep.Tasks = tasks.Len()
	if n := len(tasks.Violations()); n > 0 {
		pe := &log.ProblemsError{What: "task entries", More: max(n-log.MaxProblems, 0)}
		for _, v := range tasks.Violations()[:n-pe.More] {
			pe.Problems = append(pe.Problems, v.Problem())
		}
		printProblems(a.stderr, "", pe)
		return failed(pe, "FAILED: %d task entries break the ownership and provenance rules (the sidecar never writes such entries)", n)
	}
	keys, err := a.fenceKeys(ctx, src, tasks, rep.Size)
	if err != nil {
		return err
	}
	// Say whose key the checkpoints were verified with: one that came
	// with the data dir is whoever made it's, as a bundle's log.vkey.
	signed := fmt.Sprintf("the log key you gave (%s)", strings.TrimSpace(vkey))
	if a.vkey == "" {
		signed = fmt.Sprintf("the data dir's %s (%s: compare it with the log's key from a source you trust, or give --vkey)", logVKeyFile, strings.TrimSpace(vkey))
	}
	fmt.Fprintln(a.w, log.Printable(fmt.Sprintf("OK: %s: %d entries recomputed, %d checkpoints verified, %d stored nodes compared, %d tasks rebuilt from entries; size %d; checkpoints signed with %s",
		v.Name(), rep.Entries, rep.Checkpoints, rep.Nodes, tasks.Len(), rep.Size, signed)))
	a.printEntries(rep)
	if keys != nil {
		fmt.Fprintf(a.w, "fence keys: %d rows agree with the entries", keys.checked)
		if keys.later > 0 {
			fmt.Fprintf(a.w, "; %d name entries committed since, left to the next audit", keys.later)
		}
		fmt.Fprintln(a.w)
	}
	if st, ok := src.(log.Storage); ok {
		var acfg *online.Config
		baseDir := ""
		if a.cfgPath != "" {
			cfg, err := loadConfig(a.cfgPath)
			if err != nil {
				return err
			}
			acfg, baseDir = cfg.Anchors, cfg.dir
		}
		if a.rep.Anchors, err = auditAnchors(ctx, a.data, st, v, rep.Size, acfg, baseDir, a.cfgPath, a.w); err != nil {
			return err
		}
	}
	if a.data != "" {
		return auditDataDirPayloads(ctx, a.data, src, rep.Size, a.w)
	}
	return nil
}

// verifyData is audit's check of a data dir's store below the tree: every
// block is read (a corrupt one fails the audit, naming the file), and the
// store must hold every checkpoint that left the process (anchor records,
// the cosigned checkpoint).
func verifyData(ctx context.Context, data string, s log.Storage, vkey string, stdout io.Writer) error {
	rep := &logpebble.VerifyReport{}
	ps, pebble := s.(*logpebble.Store)
	if pebble {
		var err error
		if rep, err = ps.Verify(ctx); err != nil {
			return fmt.Errorf("FAILED reading every block of the store: %w", err)
		}
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stdout, "WARNING: %s\n", w)
	}
	v, err := parseVerifier(vkey)
	if err != nil {
		return err
	}
	n, err := checkHandedOut(ctx, data, s, v)
	if err != nil {
		return fmt.Errorf("FAILED: %w", err)
	}
	if !pebble {
		fmt.Fprintf(stdout, "store: the shared log in PostgreSQL (its pages are PostgreSQL's to checksum); the tree holds all %d checkpoints handed out that the data dir records (anchors, cosigned, the newest shown)\n", n)
		return nil
	}
	fmt.Fprintf(stdout, "store: %d keys (%d bytes) read and checksummed; the tree holds all %d checkpoints handed out that the data dir records (anchors, cosigned, the newest shown)\n", rep.Keys, rep.Bytes, n)
	return nil
}

// printEntries prints what the audit found in the entries that is not a
// failure: the calls and those without an outcome, and the warnings.
func (a *auditRun) printEntries(rep *log.AuditReport) {
	fmt.Fprintf(a.w, "calls: %d recorded", rep.Calls)
	if len(rep.OpenCalls) > 0 {
		fmt.Fprintf(a.w, ", %d without a recorded outcome (cut off by a crash or kill, refused when the log failed while recording it, or under way): entries %s", len(rep.OpenCalls), replay.Ranges(rep.OpenCalls))
	}
	fmt.Fprintln(a.w)
	if n := len(rep.WitnessConflicts); n > 0 {
		fmt.Fprintf(a.w, "WARNING: %d witness.conflict entries (%s): a witness said it holds another history of this log; each entry names the witness, its size and the checkpoint it refused (compare the witness's checkpoint with this log's at that size)\n",
			n, replay.Ranges(rep.WitnessConflicts))
	}
	if n := len(rep.UnlistedTools); n > 0 {
		fmt.Fprintf(a.w, "WARNING: %d calls (%s) name a tool_sha256 no earlier tools entry of their server lists: the definition each was made against is not in the log (an older provlog wrote such calls when a tools entry failed; the proxy writes none)\n",
			n, replay.Ranges(rep.UnlistedTools))
	}
}
