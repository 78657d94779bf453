package bundle

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// A Problem is one thing wrong with a bundle; its Part names the file it
// is in.
type Problem = log.Problem

// VerifyError lists every problem [Verify] found.
type VerifyError = log.ProblemsError

// Report says what a bundle vouches for once verified.
type Report struct {
	Manifest *Manifest
	// VKey is log.vkey, the key the checkpoint is signed with: the
	// bundle's own, which only a key from elsewhere can vouch for.
	VKey    string
	Entries uint64
	Anchors int
	// AnchorsOnEntries counts the anchors whose root the bundle ties to
	// the tree its entries are in: the checkpoint's root at its size, a
	// root the entries recompute (with tree.json's compact range [0,
	// From), any size in [From, To]), or one consistency.json proves for
	// a size the entries do not reach. The others (in a bundle exported
	// before consistency.json, at sizes outside [From, To]) are verified,
	// but not tied to this tree.
	AnchorsOnEntries int
	// AnchorsByProof counts those of AnchorsOnEntries tied by a
	// consistency proof (consistency.json).
	AnchorsByProof int
	// AnchorEntriesElsewhere counts the anchor entries of a shared log
	// made by other sidecars than the one exported through: their
	// records are in those sidecars' data dirs, not in the bundle, so
	// only the entries were checked.
	AnchorEntriesElsewhere int
	// ElsewhereSidecars are the sidecars those entries name, sorted.
	// Which sidecar the bundle was exported through is only what its
	// manifest says (anchor_sidecar): nothing signs it.
	ElsewhereSidecars []string
	// Witnesses and Threshold are the witness policy of witnesses.txt
	// (none: no witnesses); Cosigners the names of its witnesses that
	// cosigned the checkpoint, in its order.
	Witnesses, Threshold int
	Cosigners            []string
	// NoThreshold is true when witnesses.txt names no threshold (a bundle
	// exported before it did): all its witnesses were required.
	NoThreshold bool
	// SelfTrusted is true when the anchors were checked against the
	// roots their records carry (no trust/ files, none pinned).
	SelfTrusted bool
	// Pinned says which trust the caller pinned ([VerifyPinned]).
	Pinned Pinned
}

// CosignedText says which witnesses cosigned the checkpoint under the
// bundle's policy: "cosigned by 2 of 3 witnesses (policy: 2 of 3): w1,
// w3", or "no witness cosignatures".
func (r *Report) CosignedText() string {
	if r.Witnesses == 0 {
		return "no witness cosignatures"
	}
	s := cosignedText(r.Witnesses, r.Threshold, r.Cosigners)
	if r.NoThreshold {
		s += fmt.Sprintf(" (the bundle's %s names no threshold: all are required)", WitnessesFile)
	}
	return s
}

// Trust is what the bundle's trust/ files pin: the TSAs' roots and the
// Rekor logs' public keys. TSAs, when set, pin each TSA's roots for the
// tokens stored under its URL, and TSARoots are not used.
type Trust struct {
	TSARoots  []*x509.Certificate
	RekorKeys []crypto.PublicKey
	TSAs      []TSARoots
}

// Anchored is what a verified anchor record vouches for.
type Anchored struct {
	Size uint64
	Root []byte
	// Carried is the trust the record itself declares (the root of each
	// stored TSA chain, each stored Rekor key), whether or not it was
	// verified against it; [Verify] uses it to tell a broken record from a
	// trust file that names other authorities.
	Carried Trust
}

// A VerifyAnchorFunc verifies one anchor record offline: the record's
// bytes bind a checkpoint signed by v and the anchoring key anchorKey,
// against trust (nil: the roots the record carries). It returns what the
// record anchors; when the record does not parse it returns a nil
// *Anchored with its error.
//
// This package does not verify anchors itself: nothing under log/ imports
// package anchor (arrows point down), so the caller passes anchor's check
// in (cmd/provlog passes [github.com/provlog/provlog/anchor.VerifyBundled]).
type VerifyAnchorFunc func(ctx context.Context, record []byte, v note.Verifier, anchorKey crypto.PublicKey, trust *Trust) (*Anchored, error)

// Verify checks the bundle in dir with no key argument and no network:
//
//   - every file is listed in manifest.json with its SHA-256, and no
//     other file is there; each is a regular file inside dir (no link,
//     named pipe or device; no name leading out of dir), read whole only
//     up to 16 MiB (the entries and the PROV document are streamed), and
//     one of a bundle's files (a listed file no check reads is refused);
//   - the manifest is one JSON object, and what it says of the other
//     files (cosigned, trust) is what they give;
//   - the checkpoint is signed by log.vkey and, when there is a
//     witnesses.txt, meets the witness policy it states: at least its
//     threshold of its witnesses cosigned it, and every cosignature by
//     one of them verifies (another key's is ignored; a witnesses.txt
//     with no threshold line requires all of them); the manifest repeats
//     its origin, size and root;
//   - every line of provenance.jsonl is a canonical entry, and with
//     tree.json they recompute the checkpoint's root, so each entry is in
//     the log at its index; the genesis entry (entry 0, or genesis.entry
//     with its proof) names log.vkey and anchor.pub;
//   - each anchor record verifies (verifyAnchor) against anchor.pub and
//     the bundled trust roots, and an anchor entry in the range names it
//     with its SHA-256;
//   - each anchored root is the bundle's tree's at its size, whatever the
//     range: the checkpoint's at the checkpoint's size; at size 0 the
//     empty tree's (RFC 6962: SHA-256 of nothing); at a size in
//     [from, to], the root the entries recompute with tree.json's compact
//     range [0, from); at any other size, the root consistency.json
//     proves consistent with the checkpoint (RFC 6962). Another root
//     there is a fork, refused with the record, the size and both roots.
//     consistency.json holds a proof only for a size a record needs, and
//     each must verify. A bundle exported before consistency.json leaves
//     the records outside [from, to] verified but untied: the report
//     counts the tied ones (AnchorsOnEntries) and those tied by a proof
//     (AnchorsByProof);
//   - provenance.json is exactly the PROV document regenerated from the
//     entries, under the PROV mapping the manifest names (prov_mapping;
//     for a bundle made before the manifest named it, under the first or
//     the second mapping, and the report's manifest names the one that
//     gave it).
//
// Entries are read line by line; memory does not grow with the log.
func Verify(ctx context.Context, dir string, verifyAnchor VerifyAnchorFunc) (*Report, error) {
	return VerifyPinned(ctx, dir, verifyAnchor, Pins{})
}

// VerifyPinned is [Verify] with the log key, the witness policy or the
// anchoring authorities the caller trusts in place of the bundle's (pins).
func VerifyPinned(ctx context.Context, dir string, verifyAnchor VerifyAnchorFunc, pins Pins) (*Report, error) {
	return verify(ctx, dir, verifyAnchor, pins, nil)
}

// verify is [VerifyPinned], noting the entries in keep when it is not nil.
func verify(ctx context.Context, dir string, verifyAnchor VerifyAnchorFunc, pins Pins, keep *Entries) (*Report, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer root.Close()
	c := &checker{ctx: ctx, dir: dir, root: root, verifyAnchor: verifyAnchor, pins: pins, keep: keep}
	// Each step returns false when what follows cannot be checked.
	if !c.readManifest() {
		return c.fail()
	}
	c.checkListing()
	if !c.checkCheckpoint() {
		return c.fail()
	}
	c.readAnchorKey()
	if c.m.From > 0 {
		c.checkGenesisFile()
	}
	c.readTrust()
	c.pinTrust()
	c.checkAnchors()
	c.readConsistency()
	c.checkClaims()
	if !c.readTree() {
		return c.fail()
	}
	// A manifest that names no mapping was made before it named one: by
	// the first mapping, or by the second, which came a little before
	// the manifest said so. Its PROV document is checked against both.
	mappings := []int{c.m.ProvMapping}
	if c.m.ProvMapping == 0 {
		mappings = []int{ProvMappingNoAuth, ProvMappingAuth}
	}
	var pws []*provWriter
	for _, v := range mappings {
		pw, err := newProvWriter(c.cp.Origin, v)
		if err != nil {
			return nil, err
		}
		defer pw.close()
		pws = append(pws, pw)
	}
	entriesOK, err := c.checkEntries(pws)
	if err != nil {
		return nil, err
	}
	if entriesOK {
		c.tieAnchors()
		if err := c.checkProv(pws); err != nil {
			return nil, err
		}
	}
	c.checkUnread()
	if len(c.probs) > 0 {
		return c.rep, &VerifyError{What: "bundle", Problems: c.probs, More: c.moreProbs}
	}
	return c.rep, nil
}

// checker holds what [Verify] has learnt of a bundle so far, step by step.
type checker struct {
	ctx          context.Context
	dir          string
	root         *os.Root        // dir: no file is read from outside it
	opened       map[string]bool // the files the checks opened
	verifyAnchor VerifyAnchorFunc
	pins         Pins
	carry        bool      // trust takes each record's own for the part not pinned
	probs        []Problem // the first log.MaxProblems found
	moreProbs    int       // how many more were found

	m         *Manifest
	rep       *Report
	v         note.Verifier // log.vkey
	vkey      string
	cp        log.Checkpoint
	anchorKey crypto.PublicKey // anchor.pub; nil when it does not parse
	anchorDER []byte
	trust     *Trust // the trust/ files; nil when there are none

	rootsAt    map[uint64][]anchored // verified anchor records by size
	recordSum  map[string]string     // verified record name -> SHA-256
	recordHash map[string]bool       // verified records' SHA-256
	// sidecars are the manifest's anchor_sidecar and the sidecars whose
	// anchor entries' records the bundle holds; away the entries naming
	// a sidecar whose record is not here, for settleAway.
	sidecars   map[string]bool
	away       []awayEntry
	proven     map[uint64][]byte // roots consistency.json proves, by size
	rng        *compact.Range    // [0, from), extended by the entries
	rightRng   *compact.Range    // [to, size)
	entryRoots map[uint64][]byte // roots the entries give at anchored sizes
	treeOK     bool              // the entries gave the checkpoint's root
	keep       *Entries          // the entries, for VerifyEntries; nil for Verify
}

// anchored is a verified anchor record's root, for the entries to meet.
type anchored struct {
	file string
	root []byte
}

func (c *checker) bad(file, format string, args ...any) {
	if len(c.probs) == log.MaxProblems {
		c.moreProbs++
		return
	}
	c.probs = append(c.probs, Problem{Part: file, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) fail() (*Report, error) {
	return nil, &VerifyError{What: "bundle", Problems: c.probs, More: c.moreProbs}
}

// read returns a listed file's bytes, checking them against the
// manifest's SHA-256; nil when the file is not listed or unreadable.
func (c *checker) read(name string) []byte {
	want, listed := c.m.Files[name]
	if !listed {
		return nil
	}
	b, err := c.readWhole(name)
	if err != nil {
		c.bad(name, "%v", err)
		return nil
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != want {
		c.bad(name, "SHA-256 %x is not the one %s lists", s, ManifestFile)
	}
	return b
}

// readManifest parses manifest.json strictly.
func (c *checker) readManifest() bool {
	mb, err := c.readWhole(ManifestFile)
	if err != nil {
		c.bad(ManifestFile, "%v", err)
		return false
	}
	m := &Manifest{}
	if err := log.DecodeStrict(mb, m); err != nil {
		c.bad(ManifestFile, "%v", err)
		return false
	}
	for _, n := range sortedFiles(m.Files) {
		if !validName(n) {
			c.bad(ManifestFile, "lists %q, which is not a path inside the bundle", n)
			delete(m.Files, n)
		}
	}
	if m.Format != Format {
		c.bad(ManifestFile, "format %q, want %q", m.Format, Format)
		return false
	}
	switch m.ProvMapping {
	case 0, ProvMappingNoAuth, ProvMappingAuth, ProvMappingOwnActors, ProvMappingDistinctIDs, ProvMappingPNLocal: // 0: not named (see Verify)
	default:
		c.bad(ManifestFile, "prov_mapping %d is not a PROV mapping this verifier knows (%d to %d)", m.ProvMapping, ProvMappingNoAuth, ProvMapping)
		return false
	}
	c.m, c.rep = m, &Report{Manifest: m, Pinned: c.pins.pinned()}
	return true
}

// checkListing checks that every file present is listed and every
// required file is. Hashes are checked as files are read: the small ones
// whole, the two big ones while streaming.
func (c *checker) checkListing() {
	onDisk := map[string]bool{}
	fs.WalkDir(c.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			c.bad(p, "%v", err)
		case d.Type().IsRegular():
			onDisk[p] = true
		case !d.IsDir():
			if _, listed := c.m.Files[p]; !listed { // else reading it says so
				c.bad(p, "is not a regular file (%s)", fileType(d.Type()))
			}
		}
		return nil
	})
	for n := range onDisk {
		if _, ok := c.m.Files[n]; !ok && n != ManifestFile {
			c.bad(n, "is not listed in %s", ManifestFile)
		}
	}
	for _, n := range []string{EntriesFile, ProvFile, VKeyFile, AnchorPubFile, CheckpointFile, TreeFile} {
		if _, ok := c.m.Files[n]; !ok {
			c.bad(ManifestFile, "does not list the required file %s", n)
		}
	}
}

// checkCheckpoint checks the checkpoint's signature by log.vkey, its
// cosignatures by witnesses.txt, and the manifest against it.
func (c *checker) checkCheckpoint() bool {
	// A nil read is already a problem (unlisted, or unreadable): each
	// file's own check would only add a second one.
	vb := c.read(VKeyFile)
	if vb == nil {
		return false
	}
	c.vkey = strings.TrimSpace(string(vb))
	v, err := note.NewVerifier(c.vkey)
	if err != nil {
		c.bad(VKeyFile, "not a verifier key: %v", err)
		return false
	}
	if c.pins.VKey != "" && c.vkey != c.pins.VKey {
		c.bad(VKeyFile, "is %s, not the log key you gave (%s)", c.vkey, c.pins.VKey)
		return false
	}
	c.v, c.rep.VKey = v, c.vkey
	policy, witnessed := c.readPolicy()
	if c.pins.Witnesses != nil {
		policy, witnessed, c.rep.NoThreshold = *c.pins.Witnesses, true, false
	}
	cpB := c.read(CheckpointFile)
	if cpB == nil {
		return false
	}
	cp, _, err := log.OpenCheckpoint(cpB, v)
	if err != nil {
		c.bad(CheckpointFile, "not signed by the key in %s: %v", VKeyFile, err)
		return false
	}
	c.cp = cp
	if witnessed {
		c.checkCosignatures(cpB, policy)
	}
	m := c.m
	if m.Origin != cp.Origin || m.Size != cp.Size || m.Root != base64.StdEncoding.EncodeToString(cp.Hash) {
		c.bad(ManifestFile, "origin, size or root differ from the signed checkpoint")
	}
	if m.From >= m.To || m.To > cp.Size {
		c.bad(ManifestFile, "range [%d, %d) is empty or beyond the checkpoint's size %d", m.From, m.To, cp.Size)
		return false
	}
	return true
}

// readPolicy reads witnesses.txt, the witness policy the bundle was
// exported under: "threshold K", then one key a line. A witnesses.txt
// with no threshold line (a bundle exported before it had one) requires
// every witness it lists. False when there is no usable policy.
func (c *checker) readPolicy() (log.WitnessPolicy, bool) {
	wb := c.read(WitnessesFile)
	if wb == nil {
		return log.WitnessPolicy{}, false
	}
	var p log.WitnessPolicy
	var err error
	if bytes.HasPrefix(wb, []byte("threshold ")) {
		p, err = log.ParseWitnessPolicy(wb)
	} else {
		// Every key is required: the policy of as many as there are
		// lines, read by the one parser, which stops at the first wrong
		// line (a forged file of millions is never split whole).
		keys := bytes.TrimSpace(wb)
		text := fmt.Appendf(nil, "threshold %d\n", bytes.Count(keys, []byte("\n"))+1)
		p, err = log.ParseWitnessPolicy(append(append(text, keys...), '\n'))
		c.rep.NoThreshold = true
	}
	if err == nil && p.Threshold < 1 {
		err = errors.New("threshold 0 requires no cosignature: a bundle lists witnesses only for a checkpoint cosigned under them")
	}
	if err != nil {
		c.bad(WitnessesFile, "%v", err)
		return log.WitnessPolicy{}, false
	}
	return p, true
}

// checkCosignatures checks that the checkpoint meets the policy p: at
// least its threshold of its witnesses cosigned it, and every cosignature
// by one of them verifies (another key's is ignored).
func (c *checker) checkCosignatures(cpB []byte, p log.WitnessPolicy) {
	_, cos, err := p.Cosigners(cpB, c.v)
	if err != nil {
		c.bad(CheckpointFile, "cosignatures: %v", err)
		return
	}
	c.rep.Witnesses, c.rep.Threshold, c.rep.Cosigners = len(p.Witnesses), p.Threshold, cos
	if len(cos) < p.Threshold {
		whose := "the policy of " + WitnessesFile
		if c.pins.Witnesses != nil {
			whose = "the witness policy you gave"
		}
		c.bad(CheckpointFile, "is %s, fewer than %s requires", cosignedText(len(p.Witnesses), p.Threshold, cos), whose)
	}
}

// readAnchorKey parses anchor.pub.
func (c *checker) readAnchorKey() {
	b := c.read(AnchorPubFile)
	if b == nil {
		return
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		c.bad(AnchorPubFile, "not a PEM public key")
		return
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		c.bad(AnchorPubFile, "%v", err)
		return
	}
	c.anchorKey = k
	c.anchorDER, _ = x509.MarshalPKIXPublicKey(k)
}

// checkGenesis checks that b, entry 0, is this log's genesis: its origin,
// verifier key and anchoring key are the bundle's.
func (c *checker) checkGenesis(file string, b []byte) {
	e, err := log.ParseEntry(b)
	if err != nil || e.Kind != log.KindGenesis {
		c.bad(file, "entry 0 is not a genesis entry")
		return
	}
	g, err := log.ParseGenesis(e)
	if err != nil {
		c.bad(file, "%v", err)
		return
	}
	if g.Origin != c.cp.Origin {
		c.bad(file, "genesis origin %q is not the checkpoint's %q", g.Origin, c.cp.Origin)
	}
	if g.VKey != c.vkey {
		c.bad(VKeyFile, "is not the verifier key the genesis entry names")
	}
	if !bytes.Equal(g.AnchorKey, c.anchorDER) {
		c.bad(AnchorPubFile, "is not the anchoring key the genesis entry names")
	}
}

// checkGenesisFile checks genesis.entry, which a bundle that starts after
// entry 0 carries with its inclusion proof.
func (c *checker) checkGenesisFile() {
	g := c.read(GenesisFile)
	p, err := parseGenesisProof(c.read(GenesisProof))
	if err != nil {
		c.bad(GenesisProof, "%v", err)
		return
	}
	if err := log.VerifyInclusion(0, c.cp.Size, log.LeafHash(g), p, c.cp.Hash); err != nil {
		c.bad(GenesisFile, "is not entry 0 of the checkpoint's tree (%s): %v", GenesisProof, err)
		return
	}
	c.checkGenesis(GenesisFile, g)
}

// readTrust parses the trust/ files, when the bundle has them.
func (c *checker) readTrust() {
	if _, ok := c.m.Files[TSARootsFile]; !ok {
		c.rep.SelfTrusted = true
		return
	}
	c.trust = &Trust{}
	// Roots each named for its TSA pin that TSA's tokens alone; a file
	// naming none (a bundle exported before files named them) pools them.
	if b := c.read(TSARootsFile); bytes.Contains(b, []byte("-----BEGIN")) {
		tsas, err := ParseTSARoots(b)
		if err != nil {
			c.bad(TSARootsFile, "%v", err)
		}
		for _, t := range tsas {
			if t.URL == "" {
				c.trust.TSARoots = append(c.trust.TSARoots, t.Roots...)
			} else {
				c.trust.TSAs = append(c.trust.TSAs, t)
			}
		}
	}
	eachPEM(c.read(RekorKeysFile), func(der []byte) {
		if k, err := x509.ParsePKIXPublicKey(der); err != nil {
			c.bad(RekorKeysFile, "%v", err)
		} else {
			c.trust.RekorKeys = append(c.trust.RekorKeys, k)
		}
	})
}

// eachPEM calls fn with the bytes of each PEM block in b.
func eachPEM(b []byte, fn func(der []byte)) {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return
		}
		fn(blk.Bytes)
	}
}

// entryLineBytes bounds a line of provenance.jsonl as it is read: an
// entry (log.MaxEntrySize) with room to spare.
const entryLineBytes = 256 << 10

// checkEntries streams provenance.jsonl: each line a canonical entry,
// hashed into the range, fed to the PROV writer, met with the anchors;
// at the end the range must give the checkpoint's root. It reports
// whether the entries could all be read.
func (c *checker) checkEntries(pws []*provWriter) (bool, error) {
	f, _, err := c.open(EntriesFile)
	if err != nil {
		c.bad(EntriesFile, "%v", err)
		return false, nil
	}
	defer func() { c.keep.hold(f, c.treeOK) }()
	eh := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(f, eh), entryLineBytes)
	m := c.m
	i := m.From
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.bad(EntriesFile, "line %d is longer than an entry may be", i-m.From+1)
			return false, nil
		}
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			c.bad(EntriesFile, "%v", err)
			return false, nil
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			c.bad(EntriesFile, "line %d does not end in a newline", i-m.From+1)
			return false, nil
		}
		if !c.checkEntry(pws, i, line[:len(line)-1]) {
			return false, nil
		}
		c.keep.add(line)
		i++
		if errors.Is(err, io.EOF) {
			break
		}
	}
	io.Copy(io.Discard, br)
	c.settleAway()
	if hex.EncodeToString(eh.Sum(nil)) != m.Files[EntriesFile] {
		c.bad(EntriesFile, "SHA-256 is not the one %s lists", ManifestFile)
	}
	if i != m.To {
		c.bad(EntriesFile, "holds %d entries, the manifest says %d", i-m.From, m.To-m.From)
	} else if err := c.rng.AppendRange(c.rightRng, nil); err != nil {
		c.bad(TreeFile, "%v", err)
	} else if root, err := c.rng.GetRootHash(nil); err != nil || !bytes.Equal(root, c.cp.Hash) {
		c.bad(EntriesFile, "the entries (with %s) do not recompute the checkpoint's root: an entry was changed, added, removed or reordered", TreeFile)
	} else {
		c.treeOK = true
	}
	c.rep.Entries = i - m.From
	return true, nil
}

// checkEntry checks entry i, b: it parses, entry 0 is the genesis, an
// anchor entry names a record by its SHA-256; and appends it to the range
// and the PROV documents. False means the stream cannot go on.
func (c *checker) checkEntry(pws []*provWriter, i uint64, b []byte) bool {
	e, err := log.ParseEntry(b)
	if err != nil {
		c.bad(EntriesFile, "line %d (entry %d): %v", i-c.m.From+1, i, err)
		return false
	}
	if i == 0 {
		c.checkGenesis(EntriesFile, b)
	}
	if e.Kind == log.KindAnchor {
		c.anchorEntry(i, e)
	}
	for _, pw := range pws {
		pw.add(i, b, e)
	}
	if err := c.rng.Append(log.LeafHash(b), nil); err != nil {
		c.bad(EntriesFile, "%v", err)
		return false
	}
	c.noteEntryRoot(i + 1)
	return true
}

// checkProv checks that provenance.json is the PROV document the entries
// give under one of the mappings pws regenerated it with, and sets the
// manifest's mapping to the first that gives it.
func (c *checker) checkProv(pws []*provWriter) error {
	var want []string
	for _, pw := range pws {
		ph := sha256.New()
		if err := pw.finish(ph); err != nil {
			return err
		}
		want = append(want, hex.EncodeToString(ph.Sum(nil)))
	}
	pf, _, err := c.open(ProvFile)
	if err != nil {
		c.bad(ProvFile, "%v", err)
		return nil
	}
	h := sha256.New()
	io.Copy(h, pf)
	pf.Close()
	got := hex.EncodeToString(h.Sum(nil))
	if got != c.m.Files[ProvFile] {
		c.bad(ProvFile, "SHA-256 is not the one %s lists", ManifestFile)
	}
	for i, w := range want {
		if got == w {
			c.m.ProvMapping = pws[i].mapping
			return nil
		}
	}
	c.bad(ProvFile, "is not the PROV document the entries give (regenerated SHA-256 %s, file %s)", strings.Join(want, " or "), got)
	return nil
}
