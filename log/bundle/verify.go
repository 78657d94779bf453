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
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// A Problem is one thing wrong with a bundle, naming the file it is in.
type Problem struct {
	File string
	Msg  string
}

func (p Problem) String() string { return p.File + ": " + p.Msg }

// VerifyError lists every problem [Verify] found.
type VerifyError struct{ Problems []Problem }

func (e *VerifyError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return fmt.Sprintf("bundle does not verify (%d problems): %s", len(e.Problems), strings.Join(s, "; "))
}

// Report says what a bundle vouches for once verified.
type Report struct {
	Manifest  *Manifest
	Entries   uint64
	Anchors   int
	Witnesses int
	// SelfTrusted is true when the anchors were checked against the
	// roots their records carry (no trust/ files).
	SelfTrusted bool
}

// Trust is what the bundle's trust/ files pin: the TSAs' roots and the
// Rekor logs' public keys.
type Trust struct {
	TSARoots  []*x509.Certificate
	RekorKeys []crypto.PublicKey
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
//     other file is there;
//   - the checkpoint is signed by log.vkey (and cosigned by every key in
//     witnesses.txt); the manifest repeats its origin, size and root;
//   - every line of provenance.jsonl is a canonical entry, and with
//     tree.json they recompute the checkpoint's root, so each entry is in
//     the log at its index; the genesis entry (entry 0, or genesis.entry
//     with its proof) names log.vkey and anchor.pub;
//   - each anchor record verifies (verifyAnchor) against anchor.pub and
//     the bundled trust roots, its anchored root is the recomputed one
//     when its size lies in the exported range, and an anchor entry in
//     the range names it with its SHA-256;
//   - provenance.json is exactly the PROV document regenerated from the
//     entries.
//
// Entries are read line by line; memory does not grow with the log.
func Verify(ctx context.Context, dir string, verifyAnchor VerifyAnchorFunc) (*Report, error) {
	var probs []Problem
	bad := func(file, format string, args ...any) {
		probs = append(probs, Problem{File: file, Msg: fmt.Sprintf(format, args...)})
	}
	fail := func() (*Report, error) { return nil, &VerifyError{Problems: probs} }

	mb, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		bad(ManifestFile, "%v", err)
		return fail()
	}
	m := &Manifest{}
	dec := json.NewDecoder(bytes.NewReader(mb))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		bad(ManifestFile, "does not parse: %v", err)
		return fail()
	}
	if m.Format != Format {
		bad(ManifestFile, "format %q, want %q", m.Format, Format)
		return fail()
	}
	rep := &Report{Manifest: m}
	// Every file present is listed; hashes of the small ones now, of the
	// two big ones while streaming.
	onDisk := map[string]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, p)
			onDisk[filepath.ToSlash(r)] = true
		}
		return nil
	})
	for n := range onDisk {
		if _, ok := m.Files[n]; !ok && n != ManifestFile {
			bad(n, "is not listed in %s", ManifestFile)
		}
	}
	read := func(name string) []byte {
		want, listed := m.Files[name]
		if !listed {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			bad(name, "%v", err)
			return nil
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != want {
			bad(name, "SHA-256 %x is not the one %s lists", s, ManifestFile)
		}
		return b
	}
	for _, n := range []string{EntriesFile, ProvFile, VKeyFile, AnchorPubFile, CheckpointFile, TreeFile} {
		if _, ok := m.Files[n]; !ok {
			bad(ManifestFile, "does not list the required file %s", n)
		}
	}
	vkeyB := read(VKeyFile)
	vkey := strings.TrimSpace(string(vkeyB))
	v, err := note.NewVerifier(vkey)
	if err != nil {
		bad(VKeyFile, "not a verifier key: %v", err)
		return fail()
	}
	verifiers := []note.Verifier{v}
	var witnesses []note.Verifier
	if wb := read(WitnessesFile); wb != nil {
		for _, l := range strings.Split(strings.TrimSpace(string(wb)), "\n") {
			wv, err := log.NewCosignatureVerifier(l)
			if err != nil {
				bad(WitnessesFile, "line %q: %v", l, err)
				continue
			}
			witnesses = append(witnesses, wv)
			verifiers = append(verifiers, wv)
		}
	}
	cpB := read(CheckpointFile)
	cp, _, err := log.OpenCheckpoint(cpB, v)
	if err != nil {
		bad(CheckpointFile, "not signed by the key in %s: %v", VKeyFile, err)
		return fail()
	}
	if len(witnesses) > 0 {
		n, err := note.Open(cpB, note.VerifierList(verifiers...))
		if err != nil {
			bad(CheckpointFile, "cosignatures: %v", err)
		} else {
			got := map[uint32]bool{}
			for _, s := range n.Sigs {
				got[s.Hash] = true
			}
			for _, w := range witnesses {
				if !got[w.KeyHash()] {
					bad(CheckpointFile, "has no valid cosignature by witness %s (%s)", w.Name(), WitnessesFile)
				} else {
					rep.Witnesses++
				}
			}
		}
	}
	if m.Origin != cp.Origin || m.Size != cp.Size || m.Root != base64.StdEncoding.EncodeToString(cp.Hash) {
		bad(ManifestFile, "origin, size or root differ from the signed checkpoint")
	}
	if m.From >= m.To || m.To > cp.Size {
		bad(ManifestFile, "range [%d, %d) is empty or beyond the checkpoint's size %d", m.From, m.To, cp.Size)
		return fail()
	}
	var anchorKey crypto.PublicKey
	if blk, _ := pem.Decode(read(AnchorPubFile)); blk == nil {
		bad(AnchorPubFile, "not a PEM public key")
	} else if k, err := x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
		bad(AnchorPubFile, "%v", err)
	} else {
		anchorKey = k
	}
	anchorDER := []byte(nil)
	if anchorKey != nil {
		anchorDER, _ = x509.MarshalPKIXPublicKey(anchorKey)
	}
	checkGenesis := func(file string, b []byte) {
		e, err := log.ParseEntry(b)
		if err != nil || e.Kind != log.KindGenesis {
			bad(file, "entry 0 is not a genesis entry")
			return
		}
		g, err := log.ParseGenesis(e)
		if err != nil {
			bad(file, "%v", err)
			return
		}
		if g.Origin != cp.Origin {
			bad(file, "genesis origin %q is not the checkpoint's %q", g.Origin, cp.Origin)
		}
		if g.VKey != vkey {
			bad(VKeyFile, "is not the verifier key the genesis entry names")
		}
		if !bytes.Equal(g.AnchorKey, anchorDER) {
			bad(AnchorPubFile, "is not the anchoring key the genesis entry names")
		}
	}
	if m.From > 0 {
		g := read(GenesisFile)
		pb := read(GenesisProof)
		var p [][]byte
		for _, l := range strings.Fields(string(pb)) {
			h, err := base64.StdEncoding.DecodeString(l)
			if err != nil {
				bad(GenesisProof, "not base64 hashes")
			}
			p = append(p, h)
		}
		if err := log.VerifyInclusion(0, cp.Size, log.LeafHash(g), p, cp.Hash); err != nil {
			bad(GenesisFile, "is not entry 0 of the checkpoint's tree (%s): %v", GenesisProof, err)
		} else {
			checkGenesis(GenesisFile, g)
		}
	}
	// Trust roots and anchor records.
	var trust *Trust
	if _, ok := m.Files[TSARootsFile]; ok {
		trust = &Trust{}
		rest := read(TSARootsFile)
		for {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				bad(TSARootsFile, "%v", err)
				continue
			}
			trust.TSARoots = append(trust.TSARoots, c)
		}
		rest = read(RekorKeysFile)
		for {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			k, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				bad(RekorKeysFile, "%v", err)
				continue
			}
			trust.RekorKeys = append(trust.RekorKeys, k)
		}
	}
	rep.SelfTrusted = trust == nil
	type anchored struct {
		file string
		root []byte
		sum  string
	}
	rootsAt := map[uint64][]anchored{}
	records := map[string]string{} // record name -> file
	for _, name := range sortedFiles(m.Files) {
		if !strings.HasPrefix(name, AnchorsDir+"/") {
			continue
		}
		b := read(name)
		if verifyAnchor == nil {
			bad(name, "cannot be checked: no anchor verifier was given")
			continue
		}
		r, err := verifyAnchor(ctx, b, v, anchorKey, trust)
		if err != nil {
			bad(name, "%v", err)
			if r != nil && trust != nil {
				blameTrust(ctx, verifyAnchor, b, &r.Carried, v, anchorKey, trust, name, bad)
			}
			continue
		}
		rep.Anchors++
		s := sha256.Sum256(b)
		base := strings.TrimPrefix(name, AnchorsDir+"/")
		records[base] = name
		rootsAt[r.Size] = append(rootsAt[r.Size], anchored{file: name, root: r.Root, sum: hex.EncodeToString(s[:])})
	}
	// Hashes of every record, to compare with the anchor entries.
	recordSum := map[string]string{}
	for _, as := range rootsAt {
		for _, a := range as {
			recordSum[strings.TrimPrefix(a.file, AnchorsDir+"/")] = a.sum
		}
	}
	// The tree.
	var tree Tree
	tb := read(TreeFile)
	if err := json.Unmarshal(tb, &tree); err != nil {
		bad(TreeFile, "does not parse: %v", err)
		return fail()
	}
	decodeAll := func(ss []string) ([][]byte, bool) {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			h, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(h) != log.HashSize {
				return nil, false
			}
			out[i] = h
		}
		return out, true
	}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	left, ok1 := decodeAll(tree.Left)
	right, ok2 := decodeAll(tree.Right)
	rng, err1 := rf.NewRange(0, m.From, left)
	rightRng, err2 := rf.NewRange(m.To, cp.Size, right)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		bad(TreeFile, "is not the compact ranges [0, %d) and [%d, %d)", m.From, m.To, cp.Size)
		return fail()
	}
	// Stream the entries.
	pw, err := newProvWriter(cp.Origin)
	if err != nil {
		return nil, err
	}
	defer pw.close()
	f, err := os.Open(filepath.Join(dir, EntriesFile))
	if err != nil {
		bad(EntriesFile, "%v", err)
		return fail()
	}
	defer f.Close()
	eh := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(f, eh), 256<<10)
	i := m.From
	entriesOK := true
	seenRecords := map[string]bool{}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			bad(EntriesFile, "line %d is longer than an entry may be", i-m.From+1)
			entriesOK = false
			break
		}
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			bad(EntriesFile, "%v", err)
			entriesOK = false
			break
		}
		if !bytes.HasSuffix(line, []byte("\n")) {
			bad(EntriesFile, "line %d does not end in a newline", i-m.From+1)
			entriesOK = false
			break
		}
		b := line[:len(line)-1]
		e, perr := log.ParseEntry(b)
		if perr != nil {
			bad(EntriesFile, "line %d (entry %d): %v", i-m.From+1, i, perr)
			entriesOK = false
			break
		}
		if i == 0 {
			checkGenesis(EntriesFile, b)
		}
		if e.Kind == log.KindAnchor {
			name, _ := e.Fields["record"].(string)
			sum, _ := e.Fields["record_sha256"].(string)
			seenRecords[name] = true
			if got, ok := recordSum[name]; ok && got != sum {
				bad(AnchorsDir+"/"+name, "SHA-256 %s is not the one anchor entry %d commits to", got, i)
			}
		}
		pw.add(i, b, e)
		if err := rng.Append(log.LeafHash(b), nil); err != nil {
			bad(EntriesFile, "%v", err)
			entriesOK = false
			break
		}
		i++
		if as, ok := rootsAt[i]; ok && m.From == 0 {
			root, _ := rng.GetRootHash(nil)
			for _, a := range as {
				if !bytes.Equal(root, a.root) {
					bad(a.file, "anchored root at size %d is not the root of the bundled entries", i)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if entriesOK {
		io.Copy(io.Discard, br)
		if hex.EncodeToString(eh.Sum(nil)) != m.Files[EntriesFile] {
			bad(EntriesFile, "SHA-256 is not the one %s lists", ManifestFile)
		}
		if i != m.To {
			bad(EntriesFile, "holds %d entries, the manifest says %d", i-m.From, m.To-m.From)
		} else if err := rng.AppendRange(rightRng, nil); err != nil {
			bad(TreeFile, "%v", err)
		} else if root, err := rng.GetRootHash(nil); err != nil || !bytes.Equal(root, cp.Hash) {
			bad(EntriesFile, "the entries (with %s) do not recompute the checkpoint's root: an entry was changed, added, removed or reordered", TreeFile)
		}
		rep.Entries = i - m.From
	}
	// The PROV document.
	ph := sha256.New()
	if entriesOK {
		if err := pw.finish(ph); err != nil {
			return nil, err
		}
		want := hex.EncodeToString(ph.Sum(nil))
		pf, err := os.Open(filepath.Join(dir, ProvFile))
		if err != nil {
			bad(ProvFile, "%v", err)
		} else {
			h := sha256.New()
			io.Copy(h, pf)
			pf.Close()
			got := hex.EncodeToString(h.Sum(nil))
			if got != m.Files[ProvFile] {
				bad(ProvFile, "SHA-256 is not the one %s lists", ManifestFile)
			}
			if got != want {
				bad(ProvFile, "is not the PROV document the entries give (regenerated SHA-256 %s, file %s)", want, got)
			}
		}
	}
	if len(probs) > 0 {
		return rep, &VerifyError{Problems: probs}
	}
	return rep, nil
}

// blameTrust names the bundled trust file a record fails against when the
// record is sound by the roots and keys it carries itself: then what
// differs is the trust file (changed, or naming other authorities), not
// the record.
func blameTrust(ctx context.Context, verifyAnchor VerifyAnchorFunc, b []byte, self *Trust, v note.Verifier, anchorKey crypto.PublicKey, trust *Trust, name string, bad func(file, format string, args ...any)) {
	if _, err := verifyAnchor(ctx, b, v, anchorKey, self); err != nil {
		return // the record itself is broken
	}
	if _, err := verifyAnchor(ctx, b, v, anchorKey, &Trust{TSARoots: self.TSARoots, RekorKeys: trust.RekorKeys}); err != nil {
		bad(RekorKeysFile, "%s verifies by the Rekor keys it carries but not by these", name)
	}
	if _, err := verifyAnchor(ctx, b, v, anchorKey, &Trust{TSARoots: trust.TSARoots, RekorKeys: self.RekorKeys}); err != nil {
		bad(TSARootsFile, "%s verifies by the TSA roots it carries but not by these", name)
	}
}
