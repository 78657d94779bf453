package main

// provlog prove and verify-proof: a receipt for one entry, and its
// offline check.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
	"github.com/provlog/provlog/log/server"
)

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
	if *size == 0 && given(fs, "size") {
		return usageErr("--size 0 is the empty tree, which proves no entry; give a size after the entry, or leave --size out for the latest")
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
		fmt.Fprintf(out.text(), "OK: entry %d (leaf hash %x) is in %s at size %d", rep.Index, rep.LeafHash, log.Printable(rep.Origin), rep.Size)
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
	data, err := readInput(file, maxReceiptBytes, "a receipt")
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
		if entry, err = readInput(entryFile, maxEntryFileBytes, "an entry"); err != nil {
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

// maxReceiptBytes bounds a receipt verify-proof reads: 63 proof hashes and
// a checkpoint with its cosignatures take a few kilobytes.
const maxReceiptBytes = 1 << 20

// maxEntryFileBytes bounds an --entry file: an entry is at most
// log.MaxEntrySize bytes, and a re-encoding of one (which verify-proof
// recognises to say so) a few times that.
const maxEntryFileBytes = 16 * log.MaxEntrySize

// readInput reads the file name ("-": stdin), which holds what, failing
// when it is longer than max bytes rather than reading it all.
func readInput(name string, max int, what string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s holds more than %d bytes: it is not %s", name, max, what)
	}
	return b, nil
}
