package evidence

import (
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
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/anchor"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/cose"
)

// maxDirBytes bounds what Verify reads: an evidence is a few dozen
// kilobytes, plus at most a few entries of 64 KiB.
const maxDirBytes = 64 << 20

// A Problem is one thing wrong with an evidence directory; its Part names
// the file.
type Problem = log.Problem

// VerifyError holds the first log.MaxProblems problems [Verify] found and
// counts the rest (More).
type VerifyError = log.ProblemsError

// Report is what a verified evidence proves.
type Report struct {
	Manifest *Manifest
	Entry    *log.Entry
	// Checkpoint is the target; Issued the checkpoint of the entry's own
	// receipt.
	Checkpoint, Issued log.Checkpoint
	// Witnesses is the policy's number of witnesses and threshold;
	// Cosigners the names of those that cosigned the target.
	Witnesses, Threshold int
	Cosigners            []string
	Timestamps           []Timestamp
	Rekor                []RekorEntry
	Context              []Context
	Chain                *TaskChain // for a task entry, how far its task's history is proven whole
	// Pinned says which trust the caller pinned ([VerifyPinned]); the
	// rest came from the directory.
	Pinned Pinned
}

// A Timestamp is one verified RFC 3161 token over the target.
type Timestamp struct {
	TSA  string // the signer certificate's subject
	URL  string
	Time time.Time
}

// A RekorEntry is one verified Rekor entry for the target.
type RekorEntry struct {
	URL            string
	Index          int64
	IntegratedTime time.Time
}

// Context is one verified context entry.
type Context struct {
	ContextEntry
	Entry *log.Entry
}

// checker holds one run of Verify.
type checker struct {
	ctx   context.Context
	files map[string][]byte
	// probs are the first log.MaxProblems problems found, more how many
	// more there were: a forged directory can hold a problem a file.
	probs []Problem
	more  int
	// failed are the parts a problem named, kept or not, for
	// checkManifest to tell a changed file from a changed manifest.
	failed map[string]bool
	used   map[string]bool
	v      note.Verifier
	vkey   string
	rep    *Report
	leaf   []byte
	pins   Pins
	// pinPolicy is pins' witness policy (no witnesses: none pinned).
	pinPolicy log.WitnessPolicy
	// dirWitnesses and dirCosigned are witnesses.txt's policy's size and
	// verdict, which the manifest states whatever the caller pinned.
	dirWitnesses int
	dirCosigned  bool
	// anchored is what anchor.json vouches for, once verified; covered
	// are the entries proven in its checkpoint, with their files.
	anchored *anchor.Verified
	covered  []coveredEntry
	// skippedWhy is the "missing" line the skipped/ files prove, if any.
	skippedWhy string
}

// coveredEntry is an entry of the directory proven in the target.
type coveredEntry struct {
	file string
	anchor.EntryTime
}

func (c *checker) bad(file, format string, args ...any) {
	if c.failed == nil {
		c.failed = map[string]bool{}
	}
	c.failed[file] = true
	if len(c.probs) == log.MaxProblems {
		c.more++
		return
	}
	msg := strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " ")
	c.probs = append(c.probs, Problem{Part: file, Msg: msg})
}

// get returns a file's bytes (nil if absent, which required files report).
func (c *checker) get(name string, required bool) []byte {
	c.used[name] = true
	b, ok := c.files[name]
	if !ok && required {
		c.bad(name, "is missing")
	}
	return b
}

// Verify checks the evidence in dir offline against the log's verifier
// key vkey, which the caller must trust: every file is checked against
// the signed checkpoint, the anchors and the keys, and manifest.json must
// be exactly what the files give; so any changed byte fails, and each
// problem names its file. It returns what the evidence proves. The
// witnesses, TSAs and Rekor are trusted as the directory names them;
// [VerifyPinned] takes them from the caller.
func Verify(ctx context.Context, dir, vkey string) (*Report, error) {
	return VerifyPinned(ctx, dir, vkey, Pins{})
}

// VerifyPinned is [Verify] with the trust pins gives in place of the
// directory's own, where pins sets it.
func VerifyPinned(ctx context.Context, dir, vkey string, pins Pins) (*Report, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("evidence: --vkey: %w", err)
	}
	pinned, err := pins.policy()
	if err != nil {
		return nil, err
	}
	files, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	c := &checker{pinPolicy: pinned, ctx: ctx, files: files, used: map[string]bool{}, v: v, vkey: strings.TrimSpace(vkey), pins: pins,
		rep: &Report{Pinned: pins.pinned()}}
	if c.checkCore() {
		c.checkIssued()
		anchorKey := c.checkGenesisKeys()
		c.checkAnchor(anchorKey)
		c.checkSkipped(anchorKey)
		c.checkContext()
		c.checkAnchorTimes()
		c.checkManifest()
	}
	for _, name := range sortedNames(files) {
		if !c.used[name] {
			c.bad(name, "is not part of an evidence directory")
		}
	}
	if len(c.probs) > 0 {
		return nil, &VerifyError{What: "evidence", Problems: c.probs, More: c.more}
	}
	return c.rep, nil
}

func readDir(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		// The size is checked before the file is read, so that one
		// huge file costs no memory; the read is bounded too, in case
		// the file grows.
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > int64(maxDirBytes-total) {
			return fmt.Errorf("%s is %d bytes, more than the %d an evidence directory may hold in all: not an evidence directory", p, fi.Size(), maxDirBytes)
		}
		b, err := readAtMost(p, maxDirBytes-total)
		if err != nil {
			return err
		}
		total += len(b)
		r, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(r)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("evidence: reading %s: %w", dir, err)
	}
	return files, nil
}

// readAtMost reads the file p, failing when it holds more than max bytes.
func readAtMost(p string, max int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read: not an evidence directory", p, maxDirBytes)
	}
	return b, nil
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// checkCore checks the log key, the target checkpoint, the witness
// policy, the entry and its receipts; false if nothing more can be
// checked.
func (c *checker) checkCore() bool {
	if vk := c.get(VKeyFile, true); vk != nil && string(vk) != c.vkey+"\n" {
		c.bad(VKeyFile, "is not the verifier key you gave")
	}
	cpB := c.get(CheckpointFile, true)
	cp, _, err := log.OpenCheckpoint(cpB, c.v)
	if err != nil {
		c.bad(CheckpointFile, "not signed by the log key you gave: %v", err)
		return false
	}
	c.rep.Checkpoint = cp
	c.checkWitnesses(cpB)
	eb := c.get(EntryFile, true)
	e, err := log.ParseEntry(eb)
	if err != nil {
		c.bad(EntryFile, "%v", err)
		return false
	}
	c.rep.Entry = e
	c.leaf = log.LeafHash(eb)
	r, err := log.ParseReceipt(c.get(ReceiptFile, true))
	if err != nil {
		c.bad(ReceiptFile, "%v", err)
		return false
	}
	if !bytes.Equal(r.Checkpoint, cpB) {
		c.bad(ReceiptFile, "carries another checkpoint than %s", CheckpointFile)
	}
	if _, err := r.Verify(c.leaf, c.v); err != nil {
		c.bad(ReceiptFile, "does not prove %s in the checkpoint: %v", EntryFile, err)
		c.blameEntry(EntryFile, eb, r)
		return false
	}
	c.covered = append(c.covered, coveredEntry{EntryFile, anchor.EntryTime{Index: r.Index, Time: e.Time}})
	c.rep.Manifest = &Manifest{Format: Format, Origin: cp.Origin, Index: r.Index, LeafHash: hex.EncodeToString(c.leaf),
		Kind: e.Kind, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Hash), Context: []ContextEntry{}}
	c.checkCOSE(r.Index)
	return true
}

// blameEntry names the entry file too when its receipt is for another
// leaf: then the entry changed (or the receipt's extra line did).
func (c *checker) blameEntry(name string, entry []byte, r *log.Receipt) {
	if r.Extra != nil && !bytes.Equal(r.Extra, log.LeafHash(entry)) {
		c.bad(name, "is not the entry its receipt is for (leaf hash %x, the receipt names %x)", log.LeafHash(entry), r.Extra)
	}
}

// checkWitnesses applies witnesses.txt's policy to the target, and the
// caller's pinned policy when there is one (see [Pins]).
func (c *checker) checkWitnesses(cpB []byte) {
	dir, ok := c.dirPolicy()
	if ok {
		_, cos, err := dir.Cosigners(cpB, c.v)
		if err != nil {
			c.bad(CheckpointFile, "%v", err)
		}
		c.rep.Witnesses, c.rep.Threshold, c.rep.Cosigners = len(dir.Witnesses), dir.Threshold, cos
		c.dirWitnesses, c.dirCosigned = len(dir.Witnesses), len(dir.Witnesses) > 0 && len(cos) >= dir.Threshold
	}
	if len(c.pinPolicy.Witnesses) > 0 {
		c.checkPinnedWitnesses(cpB, dir, ok)
	}
}

// dirPolicy parses witnesses.txt; false when it is absent or bad.
func (c *checker) dirPolicy() (log.WitnessPolicy, bool) {
	wb := c.get(WitnessesFile, false)
	if wb == nil {
		return log.WitnessPolicy{}, false
	}
	p, err := log.ParseWitnessPolicy(wb)
	if err == nil && p.Threshold < 1 {
		// It would call the target cosigned with no cosignature, and
		// drop the missing line that says no witness vouches for it.
		err = errors.New("threshold 0 requires no cosignature: a directory lists witnesses only for a checkpoint cosigned under them")
	}
	if err != nil {
		c.bad(WitnessesFile, "%v", err)
		return log.WitnessPolicy{}, false
	}
	return p, true
}

func (c *checker) checkCOSE(index uint64) {
	b := c.get(COSEFile, false)
	if b == nil {
		return
	}
	k, err := cose.ParseVerifierKey(c.vkey)
	if err != nil {
		c.bad(COSEFile, "%v", err)
		return
	}
	r, err := cose.Parse(b)
	if err != nil {
		c.bad(COSEFile, "%v", err)
		return
	}
	root, err := r.Verify(c.leaf, k)
	if err != nil {
		c.bad(COSEFile, "%v", err)
		return
	}
	cp := c.rep.Checkpoint
	if r.Size != cp.Size || r.Index != index || !bytes.Equal(root, cp.Hash) {
		c.bad(COSEFile, "proves entry %d in a tree of size %d, not the receipt's entry %d at size %d", r.Index, r.Size, index, cp.Size)
	}
}

// checkIssued checks the entry's own receipt and the consistency proof
// from its checkpoint to the target.
func (c *checker) checkIssued() {
	m := c.rep.Manifest
	r, err := log.ParseReceipt(c.get(IssuedFile, true))
	if err != nil {
		c.bad(IssuedFile, "%v", err)
		return
	}
	ic, err := r.Verify(c.leaf, c.v)
	if err != nil || r.Index != m.Index {
		c.bad(IssuedFile, "does not prove %s at index %d: %v", EntryFile, m.Index, err)
		return
	}
	c.rep.Issued, m.IssuedSize = ic, ic.Size
	cb := c.get(ConsistencyFile, true)
	old, new, p, err := parseConsistency(cb)
	switch {
	case err != nil:
		c.bad(ConsistencyFile, "%v", err)
	case old != ic.Size || new != m.Size:
		c.bad(ConsistencyFile, "is from size %d to %d, not from the issued receipt's %d to the checkpoint's %d", old, new, ic.Size, m.Size)
	case formatConsistency(old, new, p) != string(cb):
		c.bad(ConsistencyFile, "is not in its one text form")
	default:
		if err := log.VerifyConsistency(old, new, p, ic.Hash, c.rep.Checkpoint.Hash); err != nil {
			c.bad(ConsistencyFile, "the issued receipt's checkpoint is not a prefix of the target: %v", err)
		}
	}
}

// maxProofLines bounds a consistency proof: two hashes a level of a tree
// of up to 2^64 entries.
const maxProofLines = 2 * 64

// parseConsistency parses the consistency file. It splits off no more
// lines than a proof can have: a forged file of millions of lines is
// refused, not split into millions of strings.
func parseConsistency(b []byte) (old, new uint64, p [][]byte, err error) {
	lines := bytes.SplitN(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"), 3+maxProofLines+1)
	if len(lines) < 3 || string(lines[0]) != ConsistencyHeader {
		return 0, 0, nil, fmt.Errorf("does not start with %q, old and new lines", ConsistencyHeader)
	}
	o, ok1 := bytes.CutPrefix(lines[1], []byte("old "))
	n, ok2 := bytes.CutPrefix(lines[2], []byte("new "))
	old, err1 := strconv.ParseUint(string(o), 10, 64)
	new, err2 := strconv.ParseUint(string(n), 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || old > new {
		return 0, 0, nil, errors.New("old and new are not sizes with old <= new")
	}
	if len(lines)-3 > maxProofLines {
		return 0, 0, nil, errors.New("too many proof lines")
	}
	for _, l := range lines[3:] {
		h, err := base64.StdEncoding.Strict().DecodeString(string(l))
		if err != nil || len(h) != log.HashSize {
			return 0, 0, nil, fmt.Errorf("%q is not a base64 SHA-256 hash", l)
		}
		p = append(p, h)
	}
	return old, new, p, nil
}

// checkGenesisKeys checks that the genesis entry names the log key and
// anchor.pub, and returns the anchoring key.
func (c *checker) checkGenesisKeys() crypto.PublicKey {
	apB := c.get(AnchorPubFile, true)
	var key crypto.PublicKey
	var der []byte
	if blk, rest := pem.Decode(apB); blk == nil || len(rest) != 0 || blk.Type != "PUBLIC KEY" {
		c.bad(AnchorPubFile, "is not one PEM public key")
	} else if k, err := x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
		c.bad(AnchorPubFile, "%v", err)
	} else {
		key, der = k, blk.Bytes
	}
	name := contextName(0, ".json")
	gb, ok := c.files[name]
	if c.rep.Manifest.Index == 0 {
		name = EntryFile
		gb, ok = c.files[EntryFile]
	}
	if !ok {
		c.bad(name, "is missing: the genesis entry, which names the log's keys, must be in the evidence")
		return key
	}
	g, err := log.ParseEntry(gb)
	if err != nil || g.Kind != log.KindGenesis {
		c.bad(name, "is not the log's genesis entry")
		return key
	}
	if o, _ := g.Fields["origin"].(string); o != c.v.Name() {
		c.bad(contextName(0, ".json"), "genesis origin %q is not the log's %q", o, c.v.Name())
	}
	if k, _ := g.Fields["vkey"].(string); k != c.vkey {
		c.bad(contextName(0, ".json"), "the genesis entry names another verifier key")
	}
	ak, _ := g.Fields["anchor_key"].(string)
	if d, err := base64.StdEncoding.DecodeString(ak); der != nil && (err != nil || !bytes.Equal(d, der)) {
		c.bad(AnchorPubFile, "is not the anchoring key the genesis entry names")
	}
	return key
}

var contextFile = regexp.MustCompile(`^` + ContextDir + `/(0|[1-9][0-9]{0,19})\.(json|tlog-proof)$`)

// checkContext checks every context entry's inclusion in the target and
// that they belong with the entry.
func (c *checker) checkContext() {
	var idx []uint64
	for name := range c.files {
		if m := contextFile.FindStringSubmatch(name); m != nil && m[2] == "json" {
			i, err := strconv.ParseUint(m[1], 10, 64)
			if err == nil {
				idx = append(idx, i)
			}
		}
	}
	slices.Sort(idx)
	m := c.rep.Manifest
	if m.Index != 0 && (len(idx) == 0 || idx[0] != 0) {
		c.bad(contextName(0, ".json"), "is missing: the genesis entry ties the keys to the log")
	}
	cp := c.get(CheckpointFile, true)
	for _, i := range idx {
		jn, pn := contextName(i, ".json"), contextName(i, ".tlog-proof")
		e, eb, r := c.entryAndProof(jn, pn)
		if e == nil {
			continue
		}
		if r.Index != i || !bytes.Equal(r.Checkpoint, cp) {
			c.bad(pn, "is not a proof of entry %d in %s", i, CheckpointFile)
		} else if _, err := r.Verify(log.LeafHash(eb), c.v); err != nil {
			c.bad(pn, "does not prove %s: %v", jn, err)
			c.blameEntry(jn, eb, r)
		} else {
			c.covered = append(c.covered, coveredEntry{jn, anchor.EntryTime{Index: i, Time: e.Time}})
		}
		ce := ContextEntry{Index: i, Role: roleOf(i, eb)}
		m.Context = append(m.Context, ce)
		c.rep.Context = append(c.rep.Context, Context{ContextEntry: ce, Entry: e})
	}
	c.checkTask()
}

// entryAndProof parses the entry file en and its proof file pn; nils if
// either does not parse, which is reported.
func (c *checker) entryAndProof(en, pn string) (*log.Entry, []byte, *log.Receipt) {
	eb := c.get(en, true)
	e, err := log.ParseEntry(eb)
	if err != nil {
		c.bad(en, "%v", err)
		return nil, nil, nil
	}
	r, err := log.ParseReceipt(c.get(pn, true))
	if err != nil {
		c.bad(pn, "%v", err)
		return nil, nil, nil
	}
	return e, eb, r
}

// checkTask checks that task context entries are of the entry's task and
// that cited entries are cited by a claim among them.
func (c *checker) checkTask() {
	task, _ := c.rep.Entry.Fields["task_id"].(string)
	cited := map[uint64]bool{}
	all := append([]*log.Entry{c.rep.Entry}, entriesOf(c.rep.Context)...)
	for _, e := range all {
		ev, _ := e.Fields["evidence"].([]any)
		for _, x := range ev {
			if n, ok := x.(json.Number); ok {
				if i, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
					cited[i] = true
				}
			}
		}
	}
	// A cited call comes with its call.result (an observed claim needs
	// it before the claim), a cited call.result with its call.
	for _, ce := range c.rep.Context {
		if ce.Entry == nil || ce.Entry.Kind != log.KindCallResult {
			continue
		}
		if r, err := log.ParseCallResult(ce.Entry); err == nil && r.Call < ce.Index && (cited[r.Call] || cited[ce.Index]) {
			cited[r.Call], cited[ce.Index] = true, true
		}
	}
	c.checkObservedResults()
	c.checkChain()
	// Every cited entry is here: a claim's evidence without what it cites
	// (a failed call, say) would show the claim and keep that from the
	// reader.
	have := map[uint64]bool{}
	if m := c.rep.Manifest; m != nil {
		have[m.Index] = true
	}
	for _, ce := range c.rep.Context {
		have[ce.Index] = true
	}
	for _, i := range slices.Sorted(maps.Keys(cited)) {
		if !have[i] {
			c.bad(ManifestFile, "a claim here cites entry %d, which the evidence does not hold (%s is missing)", i, contextName(i, ".json"))
		}
	}
	for _, ce := range c.rep.Context {
		name := contextName(ce.Index, ".json")
		switch {
		case ce.Role == "genesis", cited[ce.Index]:
			// A reviewed claim may cite any entry, another task's too.
		case strings.HasPrefix(ce.Role, "task."):
			if t, _ := ce.Entry.Fields["task_id"].(string); task == "" || t != task {
				c.bad(name, "is an entry of task %q, not of the entry's task %q, and no claim here cites it", t, task)
			}
		default:
			c.bad(name, "is neither a task entry nor cited by a claim here")
		}
	}
}

// checkObservedResults requires, for each observed claim here, the
// call.result of each call it cites (one written in one entry, outcome
// included, needs none): the rules admit the claim only once that result
// is in the log before it, so provlog evidence holds it, and one without
// it would show the call and keep its outcome (a failure, say) from the
// reader.
func (c *checker) checkObservedResults() {
	byIndex := map[uint64]*log.Entry{}
	results := map[uint64][]uint64{} // call -> its call.results here
	for _, ce := range c.rep.Context {
		if ce.Entry == nil {
			continue
		}
		byIndex[ce.Index] = ce.Entry
		if ce.Entry.Kind != log.KindCallResult {
			continue
		}
		if r, err := log.ParseCallResult(ce.Entry); err == nil && r.Call < ce.Index {
			results[r.Call] = append(results[r.Call], ce.Index)
		}
	}
	claims := []Context{{ContextEntry: ContextEntry{Index: c.rep.Manifest.Index}, Entry: c.rep.Entry}}
	claims = append(claims, c.rep.Context...)
	for _, cl := range claims {
		if cl.Entry == nil || cl.Entry.Kind != log.KindTaskClaim {
			continue
		}
		if p, _ := cl.Entry.Fields["provenance"].(string); p != "observed" {
			continue
		}
		ev, _ := cl.Entry.Fields["evidence"].([]any)
		for _, x := range ev {
			n, _ := x.(json.Number)
			i, err := strconv.ParseUint(n.String(), 10, 64)
			e := byIndex[i]
			if err != nil || e == nil || e.Kind != log.KindCall {
				continue // missing entries are named below
			}
			if call, err := log.ParseCall(e); err != nil || call.Outcome != nil {
				continue
			}
			if !slices.ContainsFunc(results[i], func(r uint64) bool { return r < cl.Index }) {
				c.bad(contextName(i, ".json"), "is call %d, which the observed claim at entry %d cites, without its call.result: the rules admit that claim only once the call's call.result is in the log before it, so the evidence holds it; without it the call's outcome is held back", i, cl.Index)
			}
		}
	}
}

// checkManifest requires manifest.json to be exactly what the files give.
func (c *checker) checkManifest() {
	m := c.rep.Manifest
	m.Cosigned = c.dirCosigned
	m.Missing = missing(m, c.dirWitnesses > 0, c.files[COSEFile] != nil, c.skippedWhy)
	m.Files = map[string]string{}
	for name, b := range c.files {
		if name != ManifestFile {
			s := sha256.Sum256(b)
			m.Files[name] = hex.EncodeToString(s[:])
		}
	}
	want, err := marshalManifest(m)
	if err != nil {
		c.bad(ManifestFile, "%v", err)
		return
	}
	got := c.get(ManifestFile, true)
	if got == nil || bytes.Equal(got, want) {
		return
	}
	var listed Manifest
	if err := json.Unmarshal(got, &listed); err == nil {
		// A file that failed its own checks is the one changed; for one
		// that passed them, the file or the manifest changed.
		failed := maps.Clone(c.failed)
		named := false
		for _, name := range slices.Sorted(maps.Keys(m.Files)) {
			sum := m.Files[name]
			switch {
			case listed.Files[name] == sum:
				continue
			case failed[name]:
				c.bad(name, "SHA-256 %s is not the one %s lists", sum, ManifestFile)
			default:
				// Either may have changed: name both.
				c.bad(name, "SHA-256 %s is not the one %s lists, though it passes its own checks", sum, ManifestFile)
				c.bad(ManifestFile, "lists SHA-256 %s for %s, which has %s", orNone(listed.Files[name]), name, sum)
			}
			named = true
		}
		if named {
			return
		}
	}
	c.bad(ManifestFile, "differs from what the files prove (rewrite it with provlog evidence, or check what was edited)")
}
