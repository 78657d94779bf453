package main

// `provlog export` and `provlog verify-bundle`: the wiring of log/bundle
// to a data dir.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/provlog/provlog/anchor"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/bundle"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	lf := addLogFlags(fs, "", "")
	lf.addVKey(fs, "")
	out := fs.String("out", "", "bundle directory to create")
	from := fs.Uint64("from", 0, "first entry index")
	to := fs.Uint64("to", 0, "end of the range, exclusive (default: the checkpoint's size)")
	cfgPath := fs.String("config", "", "config whose anchors: give the trust roots to bundle (default: the anchor records' own roots), and whose witnesses: and witness_policy: the witness policy a cosigned checkpoint is bundled under")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out is required")
	}
	if given(fs, "to") && *to <= *from {
		return usageErr("--to %d does not end after --from %d: the range [from, to) would be empty; leave --to out for the checkpoint's size", *to, *from)
	}
	opts := bundle.ExportOptions{Dir: *out, From: *from, To: *to, ReadAnchor: anchor.ReadBundled, Generator: "provlog " + version}
	var witnesses []string
	if *cfgPath != "" {
		var err error
		if witnesses, err = exportTrust(*cfgPath, &opts); err != nil {
			return err
		}
	}
	var src bundle.Source
	if lf.url != "" {
		r, vkey, tmp, err := lf.openRemote()
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		x, err := openRemoteExport(ctx, r, vkey, tmp)
		if err != nil {
			return err
		}
		// The sidecar serves its newest cosigned checkpoint, if any.
		opts.VKey, opts.AnchorPub, opts.AnchorsDir, opts.Checkpoint = vkey, x.anchorPub, tmp, x.checkpoint
		if x.cosigned {
			opts.Witnesses = witnesses
		}
		src = x
	} else {
		s, err := lf.openData(ctx, *cfgPath)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := localExport(ctx, s, lf.data, witnesses, &opts); err != nil {
			return err
		}
		src = s
	}
	m, err := bundle.Export(ctx, src, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported entries [%d, %d) of %s (checkpoint size %d) to %s\n", m.From, m.To, m.Origin, m.Size, *out)
	return nil
}

// parseVKeyArg returns a verifier key given as such or as a file name.
func parseVKeyArg(arg string) (string, error) {
	if _, err := note.NewVerifier(arg); err == nil {
		return arg, nil
	}
	if _, err := parseVerifier(arg); err != nil {
		return "", err
	}
	return readVKey(arg)
}

// exportTrust puts the config's TSA roots, Rekor keys and witness
// policy's threshold into opts and returns its witness keys (bundled
// only with a cosigned checkpoint).
func exportTrust(cfgPath string, opts *bundle.ExportOptions) ([]string, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	var witnesses []string
	for _, w := range cfg.Witnesses {
		witnesses = append(witnesses, w.VKey)
	}
	opts.WitnessThreshold = cfg.WitnessPolicy.Threshold
	if cfg.Anchors == nil {
		return witnesses, nil
	}
	res, err := cfg.Anchors.Resolve(configReader(cfg.dir))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// Each TSA's roots follow a line naming it (bundle.ParseTSARoots),
	// so that they vouch for its tokens alone, as they do in the config.
	var roots, keys bytes.Buffer
	for _, t := range res.Trust.TSAs {
		fmt.Fprintf(&roots, "tsa: %s\n", t.URL)
		for _, c := range t.Roots {
			pem.Encode(&roots, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		}
	}
	for _, k := range res.Trust.RekorKeys {
		der, err := x509MarshalPKIX(k)
		if err != nil {
			return nil, err
		}
		pem.Encode(&keys, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	opts.TSARoots, opts.RekorKeys = roots.Bytes(), keys.Bytes()
	return witnesses, nil
}

// localExport fills opts from a stopped sidecar's data dir.
func localExport(ctx context.Context, s log.Storage, data string, witnesses []string, opts *bundle.ExportOptions) error {
	vkey, err := readVKey(filepath.Join(data, logVKeyFile))
	if err != nil {
		return err
	}
	v, err := parseVerifier(vkey)
	if err != nil {
		return err
	}
	anchorPub, err := os.ReadFile(filepath.Join(data, anchorPubFile))
	if err != nil {
		return fmt.Errorf("reading the anchoring key: %w", err)
	}
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	opts.VKey, opts.AnchorPub, opts.AnchorsDir, opts.Checkpoint = vkey, anchorPub, filepath.Join(data, anchorDir), st.Checkpoint
	if opts.AnchorSidecar, err = anchor.ReadSidecar(opts.AnchorsDir); err != nil {
		return err
	}
	// The newest cosigned checkpoint, when the sidecar kept one that
	// covers the range; its cosignatures are checked by verify-bundle
	// against the configured witness keys.
	if c, err := os.ReadFile(filepath.Join(data, cosignedFile)); err == nil {
		if cc, _, err := log.OpenCheckpoint(c, v); err == nil && cc.Size >= max(opts.To, opts.From+1) {
			opts.Checkpoint, opts.Witnesses = c, witnesses
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// verifiedBundle is called once verify-bundle has verified the bundle in
// dir, before it says what the entries hold; a test swaps the files there.
var verifiedBundle = func(dir string) {}

func runVerifyBundle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify-bundle", stderr)
	asJSON := fs.Bool("json", false, "print the verdict and every problem as one JSON object on stdout")
	vkeyArg := fs.String("vkey", "", "the log's verifier key, or a file holding it, from a source you trust: the bundle's log.vkey must be it")
	wf := addWitnessFlags(fs, "witness-threshold", "a witness's cosignature verifier key, or a file holding one, that you trust in place of the bundle's witnesses.txt (repeatable)")
	var ap authorityPins
	ap.add(fs, "bundle")
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("give the bundle DIR")
	}
	pins := bundle.Pins{TSARoots: ap.tsaRoots, RekorKeys: ap.rekorKeys, TSAs: ap.tsas}
	if *vkeyArg != "" {
		var err error
		if pins.VKey, err = parseVKeyArg(*vkeyArg); err != nil {
			return err
		}
	}
	if policy, err := wf.policy(); err != nil {
		return err
	} else if len(policy.Witnesses) > 0 {
		pins.Witnesses = &policy
	}
	out := checkOutput{json: *asJSON, stdout: stdout, stderr: stderr}
	dir := fs.Arg(0)
	// The entries it says the tasks and payloads of are the ones it
	// verified, from the file it opened once.
	rep, be, err := bundle.VerifyEntries(ctx, dir, anchor.NewBundleVerifier(), pins)
	if err != nil {
		return out.done(nil, err, func(err error) error { return reportProblems(stderr, dir, err) })
	}
	defer be.Close()
	verifiedBundle(dir)
	m := rep.Manifest
	// Say which keys and roots came with the bundle and which the
	// auditor gave, and show the log key, for them to compare with one
	// they trust when they gave none.
	anchors := bundleAnchorsText(rep)
	w := out.text()
	signed := fmt.Sprintf("the bundle's %s (%s: compare it with the log's key from a source you trust)", bundle.VKeyFile, rep.VKey)
	if rep.Pinned.VKey {
		signed = fmt.Sprintf("the log key you gave (%s)", rep.VKey)
	}
	cosigned := rep.CosignedText()
	switch {
	case rep.Pinned.Witnesses:
		cosigned += " under the witness policy you gave"
	case rep.Witnesses > 0:
		// Whoever made the bundle chose witnesses.txt, as log.vkey: a
		// cosignature by a key it names is that key's, not a witness's
		// you know.
		cosigned += fmt.Sprintf(" under the bundle's own %s (not pinned: compare its keys with the witnesses' from a source you trust, or give --witness)", bundle.WitnessesFile)
	}
	// The origin, the key's and the witnesses' names are the bundle's:
	// escaped, so that they cannot act on the terminal.
	fmt.Fprintln(w, log.Printable(fmt.Sprintf("OK: %d entries [%d, %d) are in %s at size %d, by a checkpoint signed with %s; %s; %s; PROV document matches the entries under %s",
		rep.Entries, m.From, m.To, m.Origin, m.Size, signed, cosigned, anchors, provMappingText(m.ProvMapping))))
	// The entries are the log's; whether their task entries keep the
	// rules is the next question, as audit asks it of the log.
	tasks, pe, err := bundleTasks(ctx, be, m)
	if pe != nil {
		err = pe
	}
	if err != nil {
		return out.done(rep, err, func(err error) error { return reportProblems(stderr, dir, err) })
	}
	fmt.Fprintln(w, log.Printable("tasks: "+tasks))
	// A bundle carries entries, not payloads: say which of those the
	// entries name were purged on purpose (a purge entry in the bundle),
	// by whom, when and why.
	pr, err := bundlePayloads(ctx, be)
	if err != nil {
		return out.done(rep, fmt.Errorf("reading the bundle's entries for their payloads: %w", err), nil)
	}
	printPayloads(w, pr, m.To-1)
	return out.done(struct {
		*bundle.Report
		Payloads payloadReport `json:"payloads"`
	}{rep, pr}, nil, nil)
}

// printPayloads is verify-bundle's account of the payloads a bundle's
// entries name, to entry last: how many were purged, and each one's purge
// entry.
func printPayloads(w io.Writer, pr payloadReport, last uint64) {
	if pr.Named > 0 {
		fmt.Fprintf(w, "payloads: the entries name %d (not in the bundle); %d of them were purged, as purge entries in the bundle record; %d were not purged by entry %d\n",
			pr.Named, pr.Purged, pr.Named-pr.Purged, last)
	}
	for _, p := range pr.PurgedBy {
		// The purge entry's actor is whatever the bundle's log holds:
		// escaped, so that it cannot act on the terminal, and quoted, so
		// that its words cannot read as the line's.
		fmt.Fprintln(w, log.Printable(fmt.Sprintf("purged: entry %d (%s) names blob %s: purged by purge entry %d at %s, by %q: %q",
			p.Entry, p.Kind, p.Blob, p.Purge, p.Time.UTC().Format(time.RFC3339), p.Actor, p.Reason)))
	}
}

// bundleAnchorsText says what verify-bundle checked of a bundle's
// anchors: the records, against which trust, how they are tied to the
// entries, and the anchor entries of other sidecars it holds no records
// of.
func bundleAnchorsText(rep *bundle.Report) string {
	anchors := "no anchor records"
	switch {
	case rep.Anchors > 0 && rep.SelfTrusted:
		anchors = fmt.Sprintf("%d anchor records verified against the roots and keys the records carry", rep.Anchors)
	case rep.Anchors > 0 && (rep.Pinned.TSARoots || rep.Pinned.RekorKeys):
		anchors = fmt.Sprintf("%d anchor records verified against %s", rep.Anchors, pinnedAuthoritiesText(rep.Pinned))
	case rep.Anchors > 0:
		anchors = fmt.Sprintf("%d anchor records verified against the bundle's trust roots (trust/)", rep.Anchors)
	}
	if rep.Anchors > 0 {
		anchors += fmt.Sprintf(", %d of them anchoring a root of these entries' tree", rep.AnchorsOnEntries)
		if rep.AnchorsByProof > 0 {
			anchors += fmt.Sprintf(" (%d by a consistency proof to the checkpoint, %s)", rep.AnchorsByProof, bundle.ConsistencyFile)
		}
		if n := rep.Anchors - rep.AnchorsOnEntries; n > 0 {
			anchors += fmt.Sprintf(" (%d at sizes this bundle has neither hashes nor a consistency proof for: not tied to these entries)", n)
		}
	}
	if n := rep.AnchorEntriesElsewhere; n > 0 {
		// That the bundle came through another sidecar is the manifest's
		// word: name the entries' sidecars, so that the exporter's own
		// records left out show.
		through := fmt.Sprintf("the manifest's anchor_sidecar %s, which nothing in the bundle signs", rep.Manifest.AnchorSidecar)
		if rep.Manifest.AnchorSidecar == "" {
			through = "the manifest names no anchor_sidecar, and nothing in the bundle signs which sidecar it came through"
		}
		anchors += fmt.Sprintf("; %d anchor entries made by other sidecars of this log, records not in the bundle (sidecar %s; %s; export through those sidecars to verify them)",
			n, strings.Join(rep.ElsewhereSidecars, ", sidecar "), through)
	}
	return anchors
}

// provMappingText names the PROV mapping a bundle's document matched, as
// verify-bundle's --json report names it by number (prov_mapping).
func provMappingText(v int) string {
	switch v {
	case bundle.ProvMappingNoAuth:
		return fmt.Sprintf("PROV mapping %d (entries' auth members left out)", v)
	case bundle.ProvMappingAuth:
		return fmt.Sprintf("PROV mapping %d (with entries' auth members)", v)
	case bundle.ProvMappingOwnActors:
		return fmt.Sprintf("PROV mapping %d (provlog's own actors as software agents)", v)
	case bundle.ProvMappingDistinctIDs:
		return fmt.Sprintf("PROV mapping %d (a name \"_\" in an id escaped, apart from an empty one)", v)
	case bundle.ProvMappingPNLocal:
		return fmt.Sprintf("PROV mapping %d (a name's last \".\" in an id escaped)", v)
	}
	return fmt.Sprintf("PROV mapping %d", v)
}

func x509MarshalPKIX(k any) ([]byte, error) { return x509.MarshalPKIXPublicKey(k) }

// pinnedAuthoritiesText says which anchoring authorities a bundle's
// records were verified against when the auditor pinned some.
func pinnedAuthoritiesText(p bundle.Pinned) string {
	switch {
	case p.TSARoots && p.RekorKeys:
		return "the TSA roots and Rekor keys you gave"
	case p.TSARoots:
		return "the TSA roots you gave (Rekor keys: the bundle's)"
	default:
		return "the Rekor keys you gave (TSA roots: the bundle's)"
	}
}
