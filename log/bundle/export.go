package bundle

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// Format is the manifest's "format" value.
const Format = "provlog-bundle/1"

// PROV mapping versions: how provenance.json is made from the entries
// (the manifest's prov_mapping). A bundle is verified under the mapping
// it was made with, so a bundle exported before a change to the mapping
// still verifies.
const (
	// ProvMappingNoAuth is the first mapping, which leaves entries' auth
	// members out of the PROV document.
	ProvMappingNoAuth = 1
	// ProvMappingAuth adds the auth member (see the package doc). Bundles
	// made with it before the manifest named its mapping name none, like
	// those made with the first: [Verify] tries both for them.
	ProvMappingAuth = 2
	// ProvMappingOwnActors makes the actors provlog writes entries as
	// SoftwareAgents with their roles, and its genesis actor the agent
	// that records calls, and says which form of a result its hash is
	// over (see the package doc). Every manifest made with it names it.
	ProvMappingOwnActors = 3
	// ProvMappingDistinctIDs writes a name "_" within an id (a client's
	// version, an act chain's subject) escaped, as "%5F": before, ""
	// and "_" both gave "_", so two clients could be one agent, the
	// second's calls attributed to the first.
	ProvMappingDistinctIDs = 4
	// ProvMappingPNLocal writes a name ending in "." within an id (an
	// actor "alice.", a client's version "2.") with that dot escaped, as
	// "%2E": a PROV-N qualified name, which PROV-JSON writes ids as, ends
	// in no ".", and log:actor/alice. is none.
	ProvMappingPNLocal = 5
	// ProvMapping is the mapping [Export] writes.
	ProvMapping = ProvMappingPNLocal
)

// File names in a bundle.
const (
	EntriesFile    = "provenance.jsonl"
	ProvFile       = "provenance.json"
	ManifestFile   = "manifest.json"
	VKeyFile       = "log.vkey"
	AnchorPubFile  = "anchor.pub"
	CheckpointFile = "checkpoint"
	TreeFile       = "tree.json"
	// ConsistencyFile ties anchor records at sizes the entries do not
	// reach to the checkpoint's tree ([Consistency]).
	ConsistencyFile = "consistency.json"
	GenesisFile     = "genesis.entry"
	GenesisProof    = "genesis.proof"
	WitnessesFile   = "witnesses.txt"
	TSARootsFile    = "trust/tsa-roots.pem"
	RekorKeysFile   = "trust/rekor-keys.pem"
	AnchorsDir      = "anchors"
)

// Manifest describes a bundle. It is not signed: every value in it is
// checked against the signed checkpoint and the files.
type Manifest struct {
	Format    string `json:"format"`
	Generator string `json:"generator"`
	Origin    string `json:"origin"`
	// From and To bound the exported entries: indices [From, To).
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Size and Root repeat the bundled checkpoint's.
	Size uint64 `json:"size"`
	Root string `json:"root"`
	// Cosigned is true when the bundle has witnesses.txt, the witness
	// policy it was exported under, and the checkpoint meets it.
	Cosigned bool `json:"cosigned"`
	// Trust says where the anchor trust roots come from: "config" (the
	// exporter's configuration) or "records" (the anchor records' own).
	Trust string `json:"trust,omitempty"`
	// ProvMapping is the version of the PROV mapping provenance.json was
	// made with; absent in bundles made before it was recorded (with
	// [ProvMappingNoAuth] or [ProvMappingAuth]). [Verify]'s report names
	// the one that gave a bundle's PROV document.
	ProvMapping int `json:"prov_mapping,omitempty"`
	// AnchorSidecar is the sidecar id of the data dir exported through
	// (its anchors/sidecar.id): every anchor entry in the range that
	// names it must have its record in the bundle, while those of other
	// sidecars of a shared log keep theirs in their own data dirs.
	// Absent when the data dir has none and in older bundles.
	AnchorSidecar string `json:"anchor_sidecar,omitempty"`
	// Files maps each other file of the bundle to its hex SHA-256.
	Files map[string]string `json:"files"`
}

// Tree is tree.json: the compact ranges [0, From) and [To, Size) of the
// tree, so that the root can be recomputed from the exported entries
// alone (the role tiles play for a full log).
type Tree struct {
	Left  []string `json:"left"`
	Right []string `json:"right"`
}

// Source is the log an export reads. A log.Storage is one.
//
// A source that can vouch only for the checkpoint's tree (a running
// sidecar's, read through tiles checked against its checkpoint) returns
// an error wrapping [ErrNotHeld] from ReadNodes for nodes past it.
type Source interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
	ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error)
}

// ErrNotHeld is what a [Source]'s ReadNodes wraps for nodes past the tree
// it can vouch for. An anchor record past the checkpoint whose tree the
// source does not hold is exported untied, as before consistency.json:
// its anchoring is verified, but not that its tree extends the
// checkpoint's.
var ErrNotHeld = errors.New("the source does not hold that part of the tree")

// ExportOptions say what goes into a bundle.
type ExportOptions struct {
	// Dir is the bundle directory; it must not exist or be empty.
	Dir string
	// From and To bound the entries; To 0 means the checkpoint's size.
	From, To uint64
	// Checkpoint is the signed checkpoint note to export (the newest
	// cosigned one when there is one). Required.
	Checkpoint []byte
	// VKey is the log's verifier key. Required.
	VKey string
	// AnchorPub is the anchoring public key, PEM. Required.
	AnchorPub []byte
	// AnchorsDir, if not empty, holds the anchor records to copy, and
	// AnchorSidecar is the id of the sidecar that stored them, which the
	// manifest repeats.
	AnchorsDir    string
	AnchorSidecar string
	// ReadAnchor returns the size and root an anchor record anchors
	// (cmd/provlog passes anchor.ParseRecord's); required when there are
	// records. Export holds each to the log's tree (a record anchoring
	// another root is a fork: nothing is exported) and writes the
	// consistency proofs that tie it to the checkpoint's tree when the
	// entries do not reach its size. The record is not verified here;
	// [Verify] does that.
	ReadAnchor func(record []byte) (size uint64, root []byte, err error)
	// TSARoots and RekorKeys are PEM trust roots for the anchors; when
	// both are empty the roots the records themselves carry are used.
	TSARoots, RekorKeys []byte
	// Witnesses are the witness cosignature verifier keys of the policy
	// the checkpoint was cosigned under, and WitnessThreshold how many of
	// them must have cosigned it (0: all). Export refuses a checkpoint
	// that does not meet the policy.
	Witnesses        []string
	WitnessThreshold int
	// Generator names the software, e.g. "provlog 0.1.0".
	Generator string
}

// chunk is how many entries are read at once.
const chunk = 4096

// Export writes a bundle of src's entries [From, To) to opts.Dir.
func Export(ctx context.Context, src Source, opts ExportOptions) (_ *Manifest, err error) {
	v, err := note.NewVerifier(opts.VKey)
	if err != nil {
		return nil, fmt.Errorf("verifier key: %w", err)
	}
	cp, _, err := log.OpenCheckpoint(opts.Checkpoint, v)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint to export: %w", err)
	}
	to := opts.To
	if to == 0 {
		to = cp.Size
	}
	if opts.From >= to || to > cp.Size {
		return nil, fmt.Errorf("range [%d, %d) is empty or beyond the checkpoint's size %d", opts.From, to, cp.Size)
	}
	_, statErr := os.Stat(opts.Dir)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if des, err := os.ReadDir(opts.Dir); err != nil {
		return nil, err
	} else if len(des) > 0 {
		return nil, fmt.Errorf("%s is not empty", opts.Dir)
	}
	// A failed export leaves nothing half-written: the directory it made
	// goes, one that was there (empty) is emptied again.
	defer func() {
		if err == nil {
			return
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			os.RemoveAll(opts.Dir)
			return
		}
		des, _ := os.ReadDir(opts.Dir)
		for _, de := range des {
			os.RemoveAll(filepath.Join(opts.Dir, de.Name()))
		}
	}()
	x := &exporter{ctx: ctx, src: src, opts: &opts, v: v, cp: cp, to: to,
		m: &Manifest{Format: Format, Generator: opts.Generator, Origin: cp.Origin, From: opts.From, To: to,
			ProvMapping: ProvMapping, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Hash), Files: map[string]string{}}}
	for _, step := range []func() error{x.writeTree, x.writeGenesis, x.writeKeys, x.writeAnchors, x.writeConsistency, x.writeEntries} {
		if err = step(); err != nil {
			return nil, err
		}
	}
	mj, _ := json.MarshalIndent(x.m, "", "  ")
	if err = os.WriteFile(filepath.Join(opts.Dir, ManifestFile), append(mj, '\n'), 0o644); err != nil {
		return nil, err
	}
	return x.m, nil
}

// exporter holds one export under way; its steps write the bundle's
// files and list them in the manifest.
type exporter struct {
	ctx  context.Context
	src  Source
	opts *ExportOptions
	v    note.Verifier
	cp   log.Checkpoint
	to   uint64
	m    *Manifest
	// records are the anchor records written, in name order.
	records []exportedRecord
}

// exportedRecord is what an anchor record written to the bundle anchors.
type exportedRecord struct {
	name string
	size uint64
	root []byte
}

// write writes one bundle file and lists it with its SHA-256.
func (x *exporter) write(name string, data []byte) error {
	p := filepath.Join(x.opts.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	s := sha256.Sum256(data)
	x.m.Files[name] = hex.EncodeToString(s[:])
	return nil
}

// rangeHashes returns the compact range [b, e)'s node hashes in base64.
func (x *exporter) rangeHashes(b, e uint64) ([]string, error) {
	ids := compact.RangeNodes(b, e, nil)
	if len(ids) == 0 {
		return []string{}, nil
	}
	hs, err := x.src.ReadNodes(x.ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading tree nodes of [%d, %d): %w", b, e, err)
	}
	return encodeHashes(hs), nil
}

// encodeHashes returns hashes in base64.
func encodeHashes(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h)
	}
	return out
}

// writeTree writes tree.json, the frontier of the tree around the range.
func (x *exporter) writeTree() error {
	var tree Tree
	var err error
	if tree.Left, err = x.rangeHashes(0, x.opts.From); err != nil {
		return err
	}
	if tree.Right, err = x.rangeHashes(x.to, x.cp.Size); err != nil {
		return err
	}
	tj, _ := json.MarshalIndent(tree, "", " ")
	return x.write(TreeFile, append(tj, '\n'))
}

// writeGenesis writes entry 0 and its inclusion proof when the range
// starts after it.
func (x *exporter) writeGenesis() error {
	if x.opts.From == 0 {
		return nil
	}
	g, err := x.src.Entries(x.ctx, 0, 1)
	if err != nil {
		return fmt.Errorf("reading the genesis entry: %w", err)
	}
	p, err := log.ProveInclusion(x.ctx, x.src, 0, x.cp.Size)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, h := range p {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	if err := x.write(GenesisFile, g[0]); err != nil {
		return err
	}
	return x.write(GenesisProof, []byte(b.String()))
}

// writeKeys writes the keys, the checkpoint and the witnesses' keys.
func (x *exporter) writeKeys() error {
	if err := x.write(VKeyFile, []byte(x.opts.VKey+"\n")); err != nil {
		return err
	}
	if err := x.write(AnchorPubFile, x.opts.AnchorPub); err != nil {
		return err
	}
	if err := x.write(CheckpointFile, x.opts.Checkpoint); err != nil {
		return err
	}
	if len(x.opts.Witnesses) == 0 {
		return nil
	}
	th := x.opts.WitnessThreshold
	if th == 0 {
		th = len(x.opts.Witnesses)
	}
	p, err := log.NewWitnessPolicy(x.opts.Witnesses, th)
	if err != nil {
		return err
	}
	_, cos, err := p.Cosigners(x.opts.Checkpoint, x.v)
	if err != nil {
		return fmt.Errorf("the checkpoint to export: %w", err)
	}
	if len(cos) < th {
		return fmt.Errorf("the checkpoint to export is %s: it does not meet the witness policy to bundle", cosignedText(len(p.Witnesses), th, cos))
	}
	x.m.Cosigned = true
	return x.write(WitnessesFile, log.FormatWitnessPolicy(x.opts.Witnesses, th))
}

// cosignedText says which witnesses cosigned, under a policy of threshold
// of n: "cosigned by 2 of 3 witnesses (policy: 2 of 3): w1, w2".
func cosignedText(n, threshold int, cosigners []string) string {
	s := fmt.Sprintf("cosigned by %d of %d witnesses (policy: %d of %d)", len(cosigners), n, threshold, n)
	if len(cosigners) > 0 {
		s += ": " + strings.Join(cosigners, ", ")
	}
	return s
}

// writeAnchors copies the anchor records and, when given, their trust
// roots.
func (x *exporter) writeAnchors() error {
	if x.opts.AnchorsDir == "" {
		return nil
	}
	x.m.AnchorSidecar = x.opts.AnchorSidecar
	des, err := os.ReadDir(x.opts.AnchorsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n := 0
	for _, de := range des {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(x.opts.AnchorsDir, de.Name()))
		if err != nil {
			return err
		}
		if x.opts.ReadAnchor == nil {
			return errors.New("ExportOptions.ReadAnchor is required to export anchor records")
		}
		size, root, err := x.opts.ReadAnchor(b)
		if err != nil {
			return fmt.Errorf("anchor record %s: %w", de.Name(), err)
		}
		x.records = append(x.records, exportedRecord{name: de.Name(), size: size, root: root})
		if err := x.write(AnchorsDir+"/"+de.Name(), b); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	if len(x.opts.TSARoots) == 0 && len(x.opts.RekorKeys) == 0 {
		x.m.Trust = "records"
		return nil
	}
	x.m.Trust = "config"
	if err := x.write(TSARootsFile, x.opts.TSARoots); err != nil {
		return err
	}
	return x.write(RekorKeysFile, x.opts.RekorKeys)
}

// writeEntries writes the entries and the PROV document, in one
// streaming pass.
// createFile creates (or truncates) a bundle's file to write, 0644 as
// the others are (os.WriteFile's), whatever the umask: os.Create's 0666
// left it writable by anyone under a umask of 000.
func createFile(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (x *exporter) writeEntries() error {
	pw, err := newProvWriter(x.cp.Origin, x.m.ProvMapping)
	if err != nil {
		return err
	}
	defer pw.close()
	ef, err := createFile(filepath.Join(x.opts.Dir, EntriesFile))
	if err != nil {
		return err
	}
	defer ef.Close()
	eh := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(ef, eh), 256<<10)
	for i := x.opts.From; i < x.to; {
		end := min(x.to, i+chunk)
		es, err := x.src.Entries(x.ctx, i, end)
		if err != nil {
			return fmt.Errorf("reading entries [%d, %d): %w", i, end, err)
		}
		for _, b := range es {
			e, err := log.ParseEntry(b)
			if err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			bw.Write(b)
			bw.WriteByte('\n')
			pw.add(i, b, e)
			i++
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := ef.Sync(); err != nil {
		return err
	}
	x.m.Files[EntriesFile] = hex.EncodeToString(eh.Sum(nil))
	pf, err := createFile(filepath.Join(x.opts.Dir, ProvFile))
	if err != nil {
		return err
	}
	defer pf.Close()
	ph := sha256.New()
	if err := pw.finish(io.MultiWriter(pf, ph)); err != nil {
		return fmt.Errorf("writing the PROV document: %w", err)
	}
	if err := pf.Sync(); err != nil {
		return err
	}
	x.m.Files[ProvFile] = hex.EncodeToString(ph.Sum(nil))
	return nil
}

// sortedFiles returns the manifest's file names in order.
func sortedFiles(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeConsistency holds every anchor record to the log's tree and, for
// each size the entries do not reach (outside [From, To], other than the
// checkpoint's and 0), writes the tree's root there and the consistency
// proof between it and the checkpoint to consistency.json.
func (x *exporter) writeConsistency() error {
	var cf Consistency
	recs := slices.SortedFunc(slices.Values(x.records), func(a, b exportedRecord) int { return cmp.Compare(a.size, b.size) })
	for i, r := range recs {
		// The empty tree has no node to read: its root is fixed (RFC
		// 6962), and Verify ties a record at size 0 to it with no proof.
		var hs [][]byte
		var err error
		if r.size > 0 {
			hs, err = x.src.ReadNodes(x.ctx, compact.RangeNodes(0, r.size, nil))
		}
		if r.size > x.cp.Size && errors.Is(err, ErrNotHeld) {
			continue // untied: anchored past what the source vouches for
		}
		if err != nil {
			return fmt.Errorf("reading the tree's root at size %d (anchor record %s): %w", r.size, r.name, err)
		}
		root := log.RangeRoot(r.size, hs)
		if !bytes.Equal(root, r.root) {
			return fmt.Errorf("anchor record %s anchors root %x at size %d, but the log's tree has root %x there: the log signed two trees of one size; not exporting", r.name, r.root, r.size, root)
		}
		if r.size == 0 || r.size == x.cp.Size || r.size >= x.opts.From && r.size <= x.to || i > 0 && recs[i-1].size == r.size {
			continue
		}
		lo, hi, loRoot, hiRoot := r.size, x.cp.Size, root, x.cp.Hash
		if r.size > x.cp.Size {
			lo, hi, loRoot, hiRoot = hi, lo, hiRoot, loRoot
		}
		p, err := log.ProveConsistency(x.ctx, x.src, lo, hi)
		if err != nil {
			return fmt.Errorf("anchor record %s: %w", r.name, err)
		}
		// The proof is checked here too: a tree node the storage lost or
		// changed stops the export rather than its verification.
		if err := log.VerifyConsistency(lo, hi, p, loRoot, hiRoot); err != nil {
			return fmt.Errorf("anchor record %s: the log's consistency proof from size %d to %d: %w", r.name, lo, hi, err)
		}
		sp := SizeProof{Size: r.size, Root: Hash(root), Proof: make([]Hash, len(p))}
		for i, h := range p {
			sp.Proof[i] = Hash(h)
		}
		cf.Proofs = append(cf.Proofs, sp)
	}
	if len(cf.Proofs) == 0 {
		return nil
	}
	b, _ := json.MarshalIndent(cf, "", " ")
	return x.write(ConsistencyFile, append(b, '\n'))
}
