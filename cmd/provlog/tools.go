package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
	"github.com/provlog/provlog/log/logpebble"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/opp"
	"github.com/provlog/provlog/proxy/replay"
)

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", stderr)
	data := fs.String("data", "", "data dir to create the keys in")
	origin := fs.String("origin", "", "the log's origin (default provlog.local/<hostname>)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	if err := keygen(*data, *origin); err != nil {
		return err
	}
	vkey, err := readVKey(filepath.Join(*data, logVKeyFile))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}

func runVKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("vkey", stderr)
	data := fs.String("data", "", "data dir")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	vkey, err := readVKey(filepath.Join(*data, logVKeyFile))
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}

// openStore opens a data dir's Pebble store for a command, and says what
// to do when a running sidecar holds it. Commands that only read open it
// read-only, so that they work, and write nothing, on a full or read-only
// disk.
func openStore(data string, readOnly bool) (*logpebble.Store, error) {
	if shared := sharedStoreOf(data); shared != "" {
		return nil, fmt.Errorf("the log of data dir %s is not in it: its sidecar serves the shared log in PostgreSQL (%s), which --data does not read; ask any of that log's running sidecars with --log http://ADDR", data, shared)
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

func runProve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("prove", stderr)
	lf := addLogFlags(fs, "base URL of a running sidecar (e.g. http://127.0.0.1:8080)", "")
	ef := addEntryFlags(fs)
	size := fs.Uint64("size", 0, "tree size to prove against (default: the latest checkpoint)")
	format := fs.String("format", "tlog-proof", "tlog-proof (c2sp.org/tlog-proof, text) or cose (an RFC 9942 COSE receipt, binary)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *format != "tlog-proof" && *format != "cose" {
		return usageErr("--format must be tlog-proof or cose")
	}
	if err := lf.check(); err != nil {
		return err
	}
	index, lh, err := ef.entry()
	if err != nil {
		return err
	}
	if lf.url != "" {
		r, err := newRemote(lf.url, lf.token).receipt(ctx, index, lh, *size, *format == "cose")
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, r)
		return err
	}
	s, err := openStore(lf.data, true)
	if err != nil {
		return err
	}
	defer s.Close()
	req := inclusionRequest(index, lh)
	if *size != 0 {
		req.AtSize, req.Size = true, *size
	} else if req.Cosigned, err = readCosigned(lf.data); err != nil {
		return err
	}
	r, err := server.ProveLatest(ctx, s, req)
	if err != nil {
		return err
	}
	if *format == "cose" {
		k, err := loadKeys(lf.data)
		if err != nil {
			return err
		}
		b, err := cose.SignReceipt(k.signer, r)
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	_, err = io.WriteString(stdout, r.String())
	return err
}

// inclusionRequest names the entry at index, or the one with leafHash
// when index < 0, as prove's flags and the provlog__prove tool do.
func inclusionRequest(index int64, leafHash []byte) server.InclusionRequest {
	if index >= 0 {
		return server.InclusionRequest{Index: uint64(index)}
	}
	return server.InclusionRequest{LeafHash: leafHash}
}

func runVerifyProof(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify-proof", stderr)
	vkeyArg := fs.String("vkey", "", "the log's verifier key, or a file holding it")
	entryFile := fs.String("entry", "", "file with the exact entry bytes the receipt is for")
	wf := addWitnessFlags(fs, "threshold", "a witness's cosignature verifier key, or a file holding one (repeatable)")
	asJSON := fs.Bool("json", false, "print the verdict and the problem as one JSON object on stdout")
	policy, err := wf.parseCheck(fs, args, vkeyArg, "receipt FILE")
	if err != nil {
		return err
	}
	v, err := parseVerifier(*vkeyArg)
	if err != nil {
		return err
	}
	out := checkOutput{json: *asJSON, stdout: stdout, stderr: stderr}
	rep, err := verifyProof(fs.Arg(0), *entryFile, v, policy)
	if errors.Is(err, errUsage) {
		return err
	}
	if err == nil {
		fmt.Fprintf(out.text(), "OK: entry %d (leaf hash %x) is in %s at size %d", rep.Index, rep.LeafHash, rep.Origin, rep.Size)
		if rep.Cosigned {
			fmt.Fprintf(out.text(), ", cosigned as your witness policy requires")
		}
		fmt.Fprintln(out.text())
	}
	return out.done(rep, err, nil)
}

// proofReport is what verify-proof checked, for --json.
type proofReport struct {
	Index    uint64   `json:"index"`
	LeafHash hexBytes `json:"leaf_hash"`
	Origin   string   `json:"origin"`
	Size     uint64   `json:"size"`
	// Cosigned is true when --witness keys were given and enough of them
	// cosigned the receipt's checkpoint.
	Cosigned bool `json:"cosigned"`
}

type hexBytes []byte

func (h hexBytes) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h)), nil }

// verifyProof is verify-proof's check of the receipt in file (and of the
// entry bytes in entryFile, when not ""). What is wrong with either is a
// *log.ProblemsError naming "receipt", "entry" or "witness cosignatures".
func verifyProof(file, entryFile string, v note.Verifier, policy log.WitnessPolicy) (*proofReport, error) {
	bad := func(part string, err error) error {
		return failed(&log.ProblemsError{What: "receipt", Problems: []log.Problem{log.ProblemOf(part, err)}}, "%v", err)
	}
	data, err := readInput(file)
	if err != nil {
		return nil, err
	}
	r, err := log.ParseReceipt(data)
	if err != nil {
		return nil, bad("receipt", err)
	}
	leaf := r.Extra
	var entry []byte
	if entryFile != "" {
		if entry, err = os.ReadFile(entryFile); err != nil {
			return nil, err
		}
		if err := checkEntryBytes(entry, r); err != nil {
			return nil, bad("entry", err)
		}
		leaf = log.LeafHash(entry)
	} else if leaf == nil {
		return nil, usageErr("the receipt names no leaf hash; give the entry with --entry")
	}
	c, err := verifyWitnessedReceipt(r, leaf, v, policy)
	var wpe *log.WitnessPolicyError
	switch {
	case errors.As(err, &wpe):
		return nil, bad("witness cosignatures", err)
	case err != nil:
		return nil, bad("receipt", explainReceiptFailure(err, r, v, entry))
	}
	return &proofReport{Index: r.Index, LeafHash: leaf, Origin: c.Origin, Size: c.Size, Cosigned: len(policy.Witnesses) > 0}, nil
}

// parseVerifier takes a verifier key or the name of a file holding one.
func parseVerifier(arg string) (note.Verifier, error) {
	v, err := note.NewVerifier(arg)
	if err == nil {
		return v, nil
	}
	s, ferr := readVKey(arg)
	if ferr != nil {
		return nil, fmt.Errorf("--vkey is neither a verifier key (%v) nor a readable file (%v)", err, ferr)
	}
	return note.NewVerifier(s)
}

func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

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
		Anchors *anchor.AuditReport `json:"anchors,omitempty"`
	}
}

func (a *auditRun) run(ctx context.Context) error {
	var src log.AuditSource
	vkey := a.vkey
	if a.data != "" {
		if vkey == "" {
			var err error
			if vkey, err = readVKey(filepath.Join(a.data, logVKeyFile)); err != nil {
				return err
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
		pe := &log.ProblemsError{What: "task entries"}
		for _, v := range tasks.Violations() {
			fmt.Fprintln(a.stderr, v.String())
			pe.Problems = append(pe.Problems, v.Problem())
		}
		return failed(pe, "FAILED: %d task entries break the ownership and provenance rules (the sidecar never writes such entries)", n)
	}
	fmt.Fprintf(a.w, "OK: %s: %d entries recomputed, %d checkpoints verified, %d stored nodes compared, %d tasks rebuilt from entries; size %d\n",
		v.Name(), rep.Entries, rep.Checkpoints, rep.Nodes, tasks.Len(), rep.Size)
	fmt.Fprintf(a.w, "calls: %d recorded", rep.Calls)
	if len(rep.OpenCalls) > 0 {
		fmt.Fprintf(a.w, ", %d without a recorded outcome (cut off by a crash or kill, or under way): entries %s", len(rep.OpenCalls), replay.Ranges(rep.OpenCalls))
	}
	fmt.Fprintln(a.w)
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

func runAnchor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("anchor", stderr)
	cfgPath := fs.String("config", "", "YAML config with an anchors: section")
	data := fs.String("data", "", "data dir (overrides the config's data)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *cfgPath == "" {
		return usageErr("--config is required")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *data != "" {
		cfg.Data = *data
	}
	return anchorNow(ctx, cfg.Data, cfg.Store, cfg.Anchors, cfg.dir, stdout)
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
		fmt.Fprintf(stdout, "store: the shared log in PostgreSQL (its pages are PostgreSQL's to checksum); the tree holds all %d checkpoints handed out that the data dir records (anchors, cosigned)\n", n)
		return nil
	}
	fmt.Fprintf(stdout, "store: %d keys (%d bytes) read and checksummed; the tree holds all %d checkpoints handed out that the data dir records (anchors, cosigned)\n", rep.Keys, rep.Bytes, n)
	return nil
}
