package evidence

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
)

// Source is the log an evidence is written from. A log.Storage is one.
type Source interface {
	log.NodeReader
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
	// Checkpoint returns the log's signed checkpoint of exactly this size.
	Checkpoint(ctx context.Context, size uint64) ([]byte, error)
	// Checkpoints calls fn for each checkpoint of size >= from, in
	// increasing order, until fn returns an error.
	Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error
}

// Options say what goes into an evidence directory.
type Options struct {
	Source Source
	// Index is the entry's index.
	Index uint64
	// VKey is the log's verifier key; Signer, the log's note signer, signs
	// receipt.cose (nil: no COSE receipt, and the manifest says so).
	VKey   string
	Signer note.Signer
	// COSE, when Signer is nil, fetches the COSE receipt of the entry at
	// index in the tree of size from the log (a running sidecar signs it).
	COSE func(ctx context.Context, index, size uint64) ([]byte, error)
	// AnchorKey is the anchoring public key (PKIX DER) the genesis entry
	// names.
	AnchorKey []byte
	// Records are the stored anchor records, in any order.
	Records []*anchor.Stored
	// Witnesses (cosignature/v1 verifier keys) and Threshold are the
	// witness policy the target must meet; with witnesses, Threshold is
	// at least 1 (Write refuses 0, as Verify does).
	Witnesses []string
	Threshold int
	// Cosigned are cosigned checkpoints the caller holds (the sidecar's
	// newest), used when no anchored checkpoint is cosigned; Latest is
	// the log's latest checkpoint, used when there is neither.
	Cosigned [][]byte
	Latest   []byte
	// Trust are the TSA roots and Rekor keys the anchors are checked
	// against; nil means each record's own.
	Trust *anchor.Trust
	// Context are the other entries to include (task history, cited
	// entries); the genesis entry is always included.
	Context []uint64
	// Skipped, if not nil, is told of each anchor record covering the
	// entry that is not the target because [Verify] would refuse it
	// there, and why (see chooseTarget).
	Skipped func(record string, why error)

	// testingOnlySkipTimes makes chooseTarget take a record whatever its
	// times, to write what Verify must refuse.
	testingOnlySkipTimes bool
}

// Write writes the evidence for one entry into dir, which must not exist
// or be empty, and returns its manifest. It checks nothing it copies
// beyond what choosing the target needs; run [Verify] on the result.
func Write(ctx context.Context, dir string, o Options) (*Manifest, error) {
	v, err := note.NewVerifier(o.VKey)
	if err != nil {
		return nil, fmt.Errorf("evidence: log verifier key: %w", err)
	}
	policy, err := log.NewWitnessPolicy(o.Witnesses, o.Threshold)
	if err != nil {
		return nil, err
	}
	if len(policy.Witnesses) > 0 && policy.Threshold < 1 {
		// Verify refuses it (dirPolicy): it would call the target
		// cosigned with no cosignature.
		return nil, fmt.Errorf("evidence: witness threshold 0 of %d witnesses requires no cosignature, which Verify refuses: give a threshold of 1 to %d", len(policy.Witnesses), len(policy.Witnesses))
	}
	es, err := o.Source.Entries(ctx, o.Index, o.Index+1)
	if err != nil {
		return nil, fmt.Errorf("evidence: reading entry %d: %w", o.Index, err)
	}
	entry := es[0]
	e, err := log.ParseEntry(entry)
	if err != nil {
		return nil, fmt.Errorf("evidence: entry %d: %w", o.Index, err)
	}
	t, err := chooseTarget(ctx, o, v, policy)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return nil, fmt.Errorf("evidence: %s is not an empty directory", dir)
	}
	w := &writer{dir: dir, files: map[string]string{}}
	leaf := log.LeafHash(entry)
	m := &Manifest{Format: Format, Origin: v.Name(), Index: o.Index, LeafHash: hex.EncodeToString(leaf), Kind: e.Kind,
		Size: t.cp.Size, Root: base64.StdEncoding.EncodeToString(t.cp.Hash), Anchored: t.record != nil, Cosigned: t.cosigned,
		Missing: []string{}, Context: []ContextEntry{}}
	w.put(EntryFile, entry)
	rc, err := log.ProveReceipt(ctx, o.Source, o.Index, t.cp.Size, leaf, t.note)
	if err != nil {
		return nil, err
	}
	w.put(ReceiptFile, []byte(rc.String()))
	w.put(CheckpointFile, t.note)
	if err := w.putCOSE(ctx, o, rc, t.cp.Size); err != nil {
		return nil, err
	}
	if m.IssuedSize, err = w.putIssued(ctx, o.Source, o.Index, leaf, t.cp.Size); err != nil {
		return nil, err
	}
	w.putKeys(o, policy)
	if t.record != nil {
		if err := w.putAnchor(t.record); err != nil {
			return nil, err
		}
	}
	if t.skipped != nil {
		if err := w.putSkipped(ctx, o.Source, t.skipped); err != nil {
			return nil, err
		}
	}
	if m.Context, err = w.putContext(ctx, o, t); err != nil {
		return nil, err
	}
	m.Missing = missing(m, len(o.Witnesses) > 0, o.Signer != nil || o.COSE != nil, t.skippedWhy())
	if w.err != nil {
		return nil, w.err
	}
	m.Files = w.files
	b, err := marshalManifest(m)
	if err != nil {
		return nil, err
	}
	if w.bytes+len(b) > maxDirBytes {
		return nil, fmt.Errorf("evidence: %s would take the directory past %d bytes, more than verify-evidence reads", ManifestFile, maxDirBytes)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

// putCOSE writes the receipt's COSE form, signed here with o.Signer or
// fetched with o.COSE; without either there is none.
func (w *writer) putCOSE(ctx context.Context, o Options, rc *log.Receipt, size uint64) error {
	var c []byte
	var err error
	switch {
	case o.Signer != nil:
		c, err = cose.SignReceipt(o.Signer, rc)
	case o.COSE != nil:
		if c, err = o.COSE(ctx, o.Index, size); err != nil {
			err = fmt.Errorf("evidence: fetching the COSE receipt: %w", err)
		}
	default:
		return nil
	}
	if err != nil {
		return err
	}
	w.put(COSEFile, c)
	return nil
}

// missing says what the manifest lacks; [Verify] computes the same from
// what it finds. skipped is why no anchor is there when one was left out
// for its times (skippedWhy), else "".
func missing(m *Manifest, witnessed, hasCOSE bool, skipped string) []string {
	out := []string{}
	switch {
	case !m.Anchored && skipped != "":
		out = append(out, skipped)
	case !m.Anchored:
		out = append(out, "no anchor covers the entry: the target checkpoint is not time-stamped or in Rekor")
	}
	if !witnessed {
		out = append(out, "no witness policy: nobody but the log vouches that the log did not fork")
	} else if !m.Cosigned {
		out = append(out, "the target checkpoint is not cosigned as the witness policy requires")
	}
	if !hasCOSE {
		out = append(out, "no COSE receipt (receipt.cose): the log's signing key was not at hand")
	}
	return out
}

func marshalManifest(m *Manifest) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writer writes files and remembers their hashes; the first error sticks.
type writer struct {
	dir   string
	files map[string]string
	bytes int // written so far
	err   error
}

// put writes the file name, unless that would take the directory past
// maxDirBytes, which Verify refuses to read: a claim citing many large
// entries could, and the evidence would not verify.
func (w *writer) put(name string, b []byte) {
	if w.err != nil {
		return
	}
	if w.bytes += len(b); w.bytes > maxDirBytes {
		w.err = fmt.Errorf("evidence: %s would take the directory past %d bytes, more than verify-evidence reads; nothing more is written", name, maxDirBytes)
		return
	}
	p := filepath.Join(w.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.err = err
		return
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		w.err = err
		return
	}
	s := sha256.Sum256(b)
	w.files[name] = hex.EncodeToString(s[:])
}

// putIssued writes the receipt on the first checkpoint that covers the
// entry and the consistency proof from it to the target; it returns that
// checkpoint's size.
func (w *writer) putIssued(ctx context.Context, src Source, index uint64, leaf []byte, size uint64) (uint64, error) {
	var issued []byte
	var issuedSize uint64
	stop := errors.New("stop")
	err := src.Checkpoints(ctx, index+1, func(s uint64, n []byte) error { issued, issuedSize = n, s; return stop })
	if err != nil && !errors.Is(err, stop) {
		return 0, fmt.Errorf("evidence: finding the entry's own checkpoint: %w", err)
	}
	if issued == nil || issuedSize > size {
		return 0, fmt.Errorf("evidence: no checkpoint of size %d or less covers entry %d", size, index)
	}
	rc, err := log.ProveReceipt(ctx, src, index, issuedSize, leaf, issued)
	if err != nil {
		return 0, err
	}
	w.put(IssuedFile, []byte(rc.String()))
	cons, err := log.ProveConsistency(ctx, src, issuedSize, size)
	if err != nil {
		return 0, err
	}
	w.put(ConsistencyFile, []byte(formatConsistency(issuedSize, size, cons)))
	return issuedSize, nil
}

func formatConsistency(old, new uint64, p [][]byte) string {
	var b strings.Builder
	b.WriteString(ConsistencyHeader + "\nold " + strconv.FormatUint(old, 10) + "\nnew " + strconv.FormatUint(new, 10) + "\n")
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	return b.String()
}

// putKeys writes log.vkey, anchor.pub and witnesses.txt.
func (w *writer) putKeys(o Options, p log.WitnessPolicy) {
	w.put(VKeyFile, []byte(o.VKey+"\n"))
	w.put(AnchorPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: o.AnchorKey}))
	if len(p.Witnesses) > 0 {
		w.put(WitnessesFile, log.FormatWitnessPolicy(o.Witnesses, o.Threshold))
	}
}

// putAnchor writes the record, its tokens and Rekor entries apart, and
// the trust roots they verify against (chooseTarget verified it, under
// the configured trust too).
func (w *writer) putAnchor(st *anchor.Stored) error {
	w.put(AnchorFile, st.Bytes)
	r := st.Record
	for i, ts := range r.Timestamps {
		w.put(fmt.Sprintf("%s/%d.tst", TimestampsDir, i), ts.Token)
		w.put(fmt.Sprintf("%s/%d.pem", TimestampsDir, i), certsPEM(ts.Chain))
	}
	for i, tl := range r.Tlogs {
		if tl.RekorV1 == nil {
			continue
		}
		w.put(fmt.Sprintf("%s/%d.json", RekorDir, i), tl.RekorV1.Entry)
		w.put(fmt.Sprintf("%s/%d.pub", RekorDir, i), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: tl.RekorV1.PublicKey}))
	}
	roots, keys, err := trustPEM(anchor.TrustFromRecord(r))
	if err != nil {
		return err
	}
	w.put(TSARootsFile, roots)
	w.put(RekorKeysFile, keys)
	return nil
}

// putContext writes the genesis entry and o.Context (those inside the
// target's tree, other than the entry itself) under context/, each with
// its inclusion proof to the target.
func (w *writer) putContext(ctx context.Context, o Options, t *target) ([]ContextEntry, error) {
	idx := []uint64{0}
	for _, i := range o.Context {
		if i < t.cp.Size {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := []ContextEntry{}
	for _, i := range idx {
		if i == o.Index {
			continue
		}
		es, err := o.Source.Entries(ctx, i, i+1)
		if err != nil {
			return nil, fmt.Errorf("evidence: reading entry %d: %w", i, err)
		}
		rc, err := log.ProveReceipt(ctx, o.Source, i, t.cp.Size, log.LeafHash(es[0]), t.note)
		if err != nil {
			return nil, err
		}
		w.put(contextName(i, ".json"), es[0])
		w.put(contextName(i, ".tlog-proof"), []byte(rc.String()))
		out = append(out, ContextEntry{Index: i, Role: roleOf(i, es[0])})
	}
	return out, nil
}

func contextName(i uint64, ext string) string {
	return ContextDir + "/" + strconv.FormatUint(i, 10) + ext
}

// roleOf says why an entry is in the context: the genesis entry, a task
// entry (its kind), or an entry a claim cites.
func roleOf(i uint64, b []byte) string {
	if i == 0 {
		return "genesis"
	}
	if e, err := log.ParseEntry(b); err == nil && strings.HasPrefix(e.Kind, "task.") {
		return e.Kind
	}
	return "cited"
}

func certsPEM(chain [][]byte) []byte {
	var b []byte
	for _, c := range chain {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	return b
}

func trustPEM(t *anchor.Trust) (roots, keys []byte, err error) {
	for _, c := range t.TSARoots {
		roots = append(roots, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	for _, k := range t.RekorKeys {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("evidence: Rekor key: %w", err)
		}
		keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	return roots, keys, nil
}
