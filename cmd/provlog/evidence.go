package main

// provlog evidence and verify-evidence: one entry's self-contained
// evidence (package anchor/evidence holds the layout and the checks).

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/blobs"
	"github.com/provlog/provlog/log/bundle"
	"github.com/provlog/provlog/opp"
)

func runEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("evidence", stderr)
	lf := addLogFlags(fs, "", "")
	lf.addVKey(fs, "")
	ef := addEntryFlags(fs)
	out := fs.String("out", "", "evidence directory to create")
	cfgPath := fs.String("config", "", "config whose witnesses: and witness_policy: are the policy the checkpoint must meet, and whose anchors: pin the TSA roots and Rekor keys")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	index, lh, err := ef.entry()
	if err != nil {
		return err
	}
	if *out == "" {
		return usageErr("--out is required")
	}
	var o *evidence.Options
	if lf.url != "" {
		r, vkey, tmp, err := lf.openRemote()
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if o, err = remoteEvidenceOptions(ctx, r, vkey, tmp, index, lh); err != nil {
			return err
		}
	} else {
		s, err := lf.openData(ctx, *cfgPath)
		if err != nil {
			return err
		}
		defer s.Close()
		i := uint64(index)
		if lh != nil {
			if i, err = s.LeafIndex(ctx, lh); errors.Is(err, log.ErrNotFound) {
				return fmt.Errorf("no entry has leaf hash %x", lh)
			} else if err != nil {
				return err
			}
		}
		if o, err = evidenceOptions(ctx, s, lf.data, i); err != nil {
			return err
		}
	}
	if err := evidenceConfig(*cfgPath, o); err != nil {
		return err
	}
	if o.Context, err = taskContext(ctx, o.Source, o.Index); err != nil {
		return err
	}
	o.Skipped = func(record string, why error) {
		// why can quote an anchor record's contents (a TSA's or Rekor's
		// answer): escaped so that it cannot act on the terminal.
		fmt.Fprintln(stderr, log.Printable(fmt.Sprintf("evidence: anchor record %s is not used: %v", record, why)))
	}
	if _, err := evidence.Write(ctx, *out, *o); err != nil {
		return err
	}
	rep, err := evidence.Verify(ctx, *out, o.VKey)
	if err != nil {
		return fmt.Errorf("the evidence written to %s does not verify: %w", *out, err)
	}
	fmt.Fprintf(stdout, "wrote %s\n%s", *out, rep)
	size := rep.Checkpoint.Size
	if c, err := log.ParseCheckpointNote(o.Latest); err == nil && c.Size > size {
		size = c.Size
	}
	lines, err := purgedPayloads(ctx, o.Source, size, append([]uint64{o.Index}, o.Context...))
	if err != nil {
		return fmt.Errorf("the evidence is written to %s, but looking for purged payloads failed: %w", *out, err)
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, log.Printable(l))
	}
	return nil
}

// purgedPayloads says, of each payload (arguments or result kept in a
// blob) that the entries at indices name, whether a purge entry of the
// log's first size entries deleted it: the entry and its proofs stand,
// but the bytes it names are gone. The evidence carries entries, not
// payloads; its reader is told plainly which are no longer to be had.
func purgedPayloads(ctx context.Context, s evidence.Source, size uint64, indices []uint64) ([]string, error) {
	if len(indices) == 0 {
		return nil, nil
	}
	from := slices.Min(indices)
	var pr payloadRefs
	cited := map[uint64]*log.Entry{}
	for start := from; start < size; start += 4096 {
		es, err := s.Entries(ctx, start, min(size, start+4096))
		if err != nil {
			return nil, err
		}
		for j, b := range es {
			i := start + uint64(j)
			e, _ := log.ParseEntry(b)
			pr.add(i, e)
			if e != nil && slices.Contains(indices, i) {
				cited[i] = e
			}
		}
	}
	var out []string
	kept := pr.keptBlobs()
	for _, i := range slices.Sorted(maps.Keys(cited)) {
		e := cited[i]
		for _, h := range blobs.Refs(e) {
			p, ok := pr.purgedAfter(h, i, e.Time)
			if !ok || kept[h] {
				continue // not purged, or kept again by a newer entry
			}
			what := "result"
			if e.Fields["args_sha256"] == h {
				what = "arguments"
			}
			out = append(out, fmt.Sprintf("  payload purged: entry %d's %s (blob %s) was deleted by purge entry %d at %s by %q (reason %q): the entry and its proofs stand, but those bytes are gone",
				i, what, h, p.index, p.e.Time.UTC().Format(log.TimeFormat), p.e.Actor, p.e.Reason))
		}
	}
	return out, nil
}

// evidenceOptions gathers what a data dir and config hold for one entry.
func evidenceOptions(ctx context.Context, s log.Storage, data string, index uint64) (*evidence.Options, error) {
	k, err := loadKeys(data)
	if err != nil {
		return nil, err
	}
	st, err := s.State(ctx)
	if err != nil {
		return nil, err
	}
	if index >= st.Size {
		return nil, fmt.Errorf("entry %d is not in the log of size %d", index, st.Size)
	}
	records, err := anchor.OpenStore(filepath.Join(data, anchorDir))
	if err != nil {
		return nil, err
	}
	recs, err := records.List()
	if err != nil {
		return nil, err
	}
	o := &evidence.Options{Source: s, Index: index, VKey: k.vkey, Signer: k.signer, AnchorKey: k.anchorPub,
		Records: recs, Latest: st.Checkpoint}
	if c, err := os.ReadFile(filepath.Join(data, cosignedFile)); err == nil {
		o.Cosigned = [][]byte{c}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return o, nil
}

// evidenceConfig puts the config's witness policy and anchor trust into o.
func evidenceConfig(cfgPath string, o *evidence.Options) error {
	if cfgPath == "" {
		return nil
	}
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	for _, w := range cfg.Witnesses {
		o.Witnesses = append(o.Witnesses, w.VKey)
	}
	o.Threshold = cfg.WitnessPolicy.Threshold
	if cfg.Anchors != nil {
		res, err := cfg.Anchors.Resolve(configReader(cfg.dir))
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		o.Trust = res.Trust
	}
	return nil
}

// taskContext returns, for a task entry, the indices of its task's
// history before it and of the entries its claims cite: what makes a
// claim meaningful. It is empty for other entries.
func taskContext(ctx context.Context, s evidence.Source, index uint64) ([]uint64, error) {
	es, err := s.Entries(ctx, index, index+1)
	if err != nil {
		return nil, err
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		return nil, err
	}
	id, _ := e.Fields["task_id"].(string)
	if !strings.HasPrefix(e.Kind, "task.") || id == "" {
		return nil, nil
	}
	tasks, err := opp.Rebuild(ctx, s, index+1)
	if err != nil {
		return nil, fmt.Errorf("rebuilding task state: %w", err)
	}
	task, err := tasks.Task(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading task %s: %w", id, err)
	}
	if task == nil {
		return nil, fmt.Errorf("entry %d names task %s, which the log's task state does not hold", index, id)
	}
	var out []uint64
	for _, ev := range task.History {
		if ev.Index > index {
			break
		}
		out = append(out, ev.Index)
		if ev.Kind == opp.KindClaim {
			for _, c := range ev.Evidence {
				pair, err := callPair(ctx, s, c, ev.Index)
				if err != nil {
					return nil, err
				}
				out = append(out, pair...)
			}
		}
	}
	return out, nil
}

// callPair returns cited entry c with the other half of its call, if it
// is one: a call's call.result (the first before the claim at index
// claim: an observed claim needs it there, and the reader of the evidence
// needs it to judge the claim) or a call.result's call.
func callPair(ctx context.Context, s evidence.Source, c, claim uint64) ([]uint64, error) {
	es, err := s.Entries(ctx, c, c+1)
	if err != nil {
		return nil, err
	}
	e, err := log.ParseEntry(es[0])
	if err != nil {
		return []uint64{c}, nil // cited as it is; the claim's checks judge it
	}
	switch e.Kind {
	case log.KindCallResult:
		if r, err := log.ParseCallResult(e); err == nil && r.Call < c {
			return []uint64{r.Call, c}, nil
		}
	case log.KindCall:
		const chunk = 1024
		for start := c + 1; start < claim; start += chunk {
			es, err := s.Entries(ctx, start, min(claim, start+chunk))
			if err != nil {
				return nil, err
			}
			for i, b := range es {
				if !bytes.Contains(b, []byte(`"kind":"call.result"`)) {
					continue
				}
				if e, err := log.ParseEntry(b); err == nil {
					if r, err := log.ParseCallResult(e); err == nil && r.Call == c {
						return []uint64{c, start + uint64(i)}, nil
					}
				}
			}
		}
	}
	return []uint64{c}, nil
}

func runVerifyEvidence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify-evidence", stderr)
	asJSON := fs.Bool("json", false, "print the verdict and every problem as one JSON object on stdout")
	vkeyArg := fs.String("vkey", "", "the log's verifier key, or a file holding it, from a source you trust")
	wf := addWitnessFlags(fs, "witness-threshold", "a witness's cosignature verifier key, or a file holding one, that you trust in place of the directory's witnesses.txt (repeatable)")
	var ap authorityPins
	ap.add(fs, "directory")
	policy, err := wf.parseCheck(fs, args, vkeyArg, "evidence DIR")
	if err != nil {
		return err
	}
	pins := evidence.Pins{Witnesses: wf.keys.strings(), Threshold: policy.Threshold, TSARoots: ap.tsaRoots, RekorKeys: ap.rekorKeys}
	for _, t := range ap.tsas {
		pins.TSAs = append(pins.TSAs, anchor.TSATrust{URL: t.URL, Roots: t.Roots})
	}
	vkey, err := parseVKeyArg(*vkeyArg)
	if err != nil {
		return err
	}
	out := checkOutput{json: *asJSON, stdout: stdout, stderr: stderr}
	dir := fs.Arg(0)
	rep, err := evidence.VerifyPinned(ctx, dir, vkey, pins)
	if err != nil {
		return out.done(nil, err, func(err error) error { return reportProblems(stderr, dir, err) })
	}
	w := out.text()
	fmt.Fprintf(w, "OK: %s", rep)
	fmt.Fprintf(w, "  (checked offline against the log key %s; root %s)\n", strings.SplitN(vkey, "+", 2)[0], base64.StdEncoding.EncodeToString(rep.Checkpoint.Hash))
	fmt.Fprint(w, rep.TrustString())
	return out.done(rep, nil, nil)
}

// authorityPins are the anchoring authorities a check's caller trusts in
// place of what they check carries: --tsa-roots and --rekor-key.
type authorityPins struct {
	tsaRoots  []*x509.Certificate
	rekorKeys []crypto.PublicKey
	// tsas are the roots pinned per TSA, from files that name them.
	tsas []bundle.TSARoots
}

// add defines the flags on fs; what names what they replace trust of.
func (p *authorityPins) add(fs *flag.FlagSet, what string) {
	fs.Func("tsa-roots", fmt.Sprintf("a PEM file of TSA root certificates you trust in place of the %s's trust/tsa-roots.pem, a line \"tsa: URL\" before each TSA's roots pinning them for its tokens alone (repeatable)", what), func(arg string) error {
		b, err := os.ReadFile(arg)
		if err != nil {
			return err
		}
		tsas, err := bundle.ParseTSARoots(b)
		if err != nil {
			return fmt.Errorf("%s: %w", arg, err)
		}
		for _, t := range tsas {
			if t.URL == "" {
				p.tsaRoots = append(p.tsaRoots, t.Roots...)
			} else {
				p.tsas = append(p.tsas, t)
			}
		}
		if len(p.tsaRoots) > 0 && len(p.tsas) > 0 {
			return fmt.Errorf("%s: the --tsa-roots files name the TSA of some roots and not of others: name every root's TSA, or none", arg)
		}
		return nil
	})
	fs.Func("rekor-key", fmt.Sprintf("a PEM file of a Rekor public key you trust in place of the %s's (repeatable)", what), func(arg string) error {
		k, err := online.LoadPublicKey(os.ReadFile, arg)
		p.rekorKeys = append(p.rekorKeys, k)
		return err
	})
}
