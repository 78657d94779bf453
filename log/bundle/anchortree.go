package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/provlog/provlog/log"
)

// Consistency is consistency.json: for each size an anchor record anchors
// that the entries cannot reach (below From or above To, other than the
// checkpoint's own size), the root the checkpoint's tree has there and the
// RFC 6962 consistency proof between that size and the checkpoint's, from
// the smaller to the larger. Proofs are in increasing size, one per size.
type Consistency struct {
	Proofs []SizeProof `json:"proofs"`
}

// SizeProof ties the tree of Size with root Root to the checkpoint's tree.
type SizeProof struct {
	Size  uint64 `json:"size"`
	Root  Hash   `json:"root"`
	Proof []Hash `json:"proof"`
}

// A Hash is a tree hash as consistency.json spells it: the standard
// base64 of its log.HashSize bytes, in the one spelling strict base64
// decoding takes. It decodes in place, so a proof costs no memory beyond
// its hashes however long the file.
type Hash [log.HashSize]byte

// MarshalText spells h in base64.
func (h Hash) MarshalText() ([]byte, error) {
	return base64.StdEncoding.AppendEncode(nil, h[:]), nil
}

// UnmarshalText decodes base64 b, which must be a tree hash.
func (h *Hash) UnmarshalText(b []byte) error {
	var d [log.HashSize + 1]byte
	if len(b) != base64.StdEncoding.EncodedLen(log.HashSize) {
		return fmt.Errorf("a root or proof step is not base64 of a %d-byte hash", log.HashSize)
	}
	if n, err := base64.StdEncoding.Strict().Decode(d[:], b); err != nil || n != log.HashSize {
		return fmt.Errorf("a root or proof step is not base64 of a %d-byte hash", log.HashSize)
	}
	copy(h[:], d[:])
	return nil
}

// hashes returns hs as byte slices.
func hashes(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// parseConsistency parses consistency.json strictly, calling each with
// its proofs in turn. It reads them one at a time (a forged file of 16 MiB
// can list millions): memory holds one proof, not the list.
func parseConsistency(b []byte, each func(SizeProof)) error {
	if err := log.CheckStrict(b, &Consistency{}); err != nil {
		return err
	}
	// b is one object whose one member, if any, is "proofs".
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("does not parse: is not a JSON object")
	}
	for dec.More() {
		dec.Token() // "proofs"
		switch t, err := dec.Token(); {
		case err != nil:
			return fmt.Errorf("does not parse: %w", err)
		case t == nil:
			continue // null: no proofs
		case t != json.Delim('['):
			return errors.New("does not parse: proofs is not a list")
		}
		var last uint64
		for i := 0; dec.More(); i++ {
			// A SizeProof whose root is required: a zero hash is not
			// taken for a missing one.
			var sp struct {
				Size  uint64 `json:"size"`
				Root  *Hash  `json:"root"`
				Proof []Hash `json:"proof"`
			}
			if err := dec.Decode(&sp); err != nil {
				return fmt.Errorf("proof %d does not parse: %w", i, err)
			}
			if sp.Size <= last {
				return fmt.Errorf("proof %d: size %d is not above the one before it (sizes are increasing, from 1)", i, sp.Size)
			}
			if sp.Root == nil {
				return fmt.Errorf("proof %d (size %d) has no root", i, sp.Size)
			}
			last = sp.Size
			each(SizeProof{Size: sp.Size, Root: *sp.Root, Proof: sp.Proof})
		}
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("does not parse: %w", err)
		}
	}
	return nil
}

// decodeHashes decodes base64 tree hashes; false if one is not one.
func decodeHashes(ss []string) ([][]byte, bool) {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		h, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(h) != log.HashSize {
			return nil, false
		}
		out[i] = h
	}
	return out, true
}

// checkAnchors verifies every anchor record and notes the roots they
// anchor and their SHA-256, for the entries to meet.
func (c *checker) checkAnchors() {
	c.rootsAt = map[uint64][]anchored{}
	c.recordSum = map[string]string{}
	c.recordHash = map[string]bool{}
	c.sidecars = map[string]bool{}
	if c.m.AnchorSidecar != "" {
		c.sidecars[c.m.AnchorSidecar] = true
	}
	for _, name := range sortedFiles(c.m.Files) {
		if !strings.HasPrefix(name, AnchorsDir+"/") {
			continue
		}
		b := c.read(name)
		if b == nil {
			continue
		}
		if c.verifyAnchor == nil {
			c.bad(name, "cannot be checked: no anchor verifier was given")
			continue
		}
		trust := c.trustFor(c.ctx, b)
		r, err := c.verifyAnchor(c.ctx, b, c.v, c.anchorKey, trust)
		if err != nil {
			c.bad(name, "%v", err)
			if r != nil && trust != nil {
				c.blameTrust(b, &r.Carried, trust, name)
			}
			continue
		}
		c.rep.Anchors++
		s := sha256.Sum256(b)
		c.recordSum[strings.TrimPrefix(name, AnchorsDir+"/")] = hex.EncodeToString(s[:])
		c.recordHash[hex.EncodeToString(s[:])] = true
		if r.Size != c.cp.Size {
			c.rootsAt[r.Size] = append(c.rootsAt[r.Size], anchored{file: name, root: r.Root})
		} else if !bytes.Equal(r.Root, c.cp.Hash) {
			// Whatever the range, the checkpoint's own size is held to
			// its root: two roots of one size are a fork.
			c.bad(name, "anchors root %x at size %d, the checkpoint's, whose root is %x: the log signed two trees of one size", r.Root, r.Size, c.cp.Hash)
		} else {
			c.rep.AnchorsOnEntries++
		}
	}
}

// anchorEntry meets anchor entry i, e, with the record it commits to by
// SHA-256. The entries say there was an anchor: a bundle without its
// record (deleted, the manifest rewritten) would pass for one of a log
// never anchored there. An entry naming a sidecar that is neither the
// manifest's anchor_sidecar nor one whose records the bundle holds was
// made by another sidecar of a shared log, which keeps its records:
// settleAway counts it once all entries are read.
func (c *checker) anchorEntry(i uint64, e *log.Entry) {
	a, err := log.ParseAnchorEntry(e)
	switch {
	case err != nil:
		c.bad(EntriesFile, "line %d (entry %d): %v", i-c.m.From+1, i, err)
	case c.recordHash[a.RecordHash]:
		if a.Sidecar != "" {
			c.sidecars[a.Sidecar] = true
		}
	case c.recordSum[a.Record] != "":
		c.bad(AnchorsDir+"/"+a.Record, "SHA-256 %s is not the one anchor entry %d commits to", c.recordSum[a.Record], i)
	case a.Sidecar != "":
		c.away = append(c.away, awayEntry{index: i, record: a.Record, hash: a.RecordHash, sidecar: a.Sidecar})
	default:
		c.bad(AnchorsDir+"/"+a.Record, "is missing: anchor entry %d names it (SHA-256 %s)", i, a.RecordHash)
	}
}

// An awayEntry is an anchor entry whose record is not in the bundle, and
// the sidecar it names.
type awayEntry struct {
	index                 uint64
	record, hash, sidecar string
}

// settleAway holds the anchor entries whose records are not in the
// bundle to the sidecars whose records it holds: one of those is missing
// a record; the others' records are kept elsewhere, and counted.
func (c *checker) settleAway() {
	for _, a := range c.away {
		if c.sidecars[a.sidecar] {
			c.bad(AnchorsDir+"/"+a.record, "is missing: anchor entry %d names it (SHA-256 %s), of sidecar %s, whose other records the bundle holds", a.index, a.hash, a.sidecar)
			continue
		}
		c.rep.AnchorEntriesElsewhere++
		if !slices.Contains(c.rep.ElsewhereSidecars, a.sidecar) {
			c.rep.ElsewhereSidecars = append(c.rep.ElsewhereSidecars, a.sidecar)
		}
	}
	slices.Sort(c.rep.ElsewhereSidecars)
}

// reachable reports whether the entries give the tree's root at size:
// with tree.json's compact range [0, from) every size in [from, to).
func (c *checker) reachable(size uint64) bool {
	return size >= c.m.From && size <= c.m.To
}

// readConsistency reads consistency.json, when the bundle has it (one
// exported before it was written has not), and checks each proof against
// the checkpoint: the roots it proves are the tree's at their sizes.
func (c *checker) readConsistency() {
	c.proven = map[uint64][]byte{}
	b := c.read(ConsistencyFile)
	if b == nil {
		return
	}
	err := parseConsistency(b, func(sp SizeProof) {
		if len(c.rootsAt[sp.Size]) == 0 || c.reachable(sp.Size) {
			c.unneeded(sp.Size)
			return
		}
		root := sp.Root[:]
		lo, hi, loRoot, hiRoot := sp.Size, c.cp.Size, root, c.cp.Hash
		if sp.Size > c.cp.Size {
			lo, hi, loRoot, hiRoot = hi, lo, hiRoot, loRoot
		}
		if err := log.VerifyConsistency(lo, hi, hashes(sp.Proof), loRoot, hiRoot); err != nil {
			c.bad(ConsistencyFile, "the proof for size %d does not tie root %x there to the checkpoint's tree (size %d, root %x): %v", sp.Size, root, c.cp.Size, c.cp.Hash, err)
			return
		}
		c.proven[sp.Size] = root
	})
	if err != nil {
		// What the file proved before it broke is not taken either.
		c.proven = map[uint64][]byte{}
		c.bad(ConsistencyFile, "%v", err)
	}
}

// unneeded reports a proof for size, where no verified anchor record
// needs one. Past the problems kept it only counts it, allocating nothing:
// a forged file can hold millions.
func (c *checker) unneeded(size uint64) {
	if len(c.probs) == log.MaxProblems {
		c.moreProbs++
		return
	}
	c.bad(ConsistencyFile, "holds a proof for size %d, where no verified anchor record needs one (the entries reach [%d, %d], the checkpoint is %d)", size, c.m.From, c.m.To, c.cp.Size)
}

// tieAnchors holds every verified anchor record not at the checkpoint's
// size to the root the bundle's tree has at its size: recomputed from the
// entries (once they gave the checkpoint's root) or proven by
// consistency.json. A record at a size the bundle has no root for stays
// verified but untied when the bundle has no consistency.json (exported
// before it was written) or when it lies past the checkpoint (the
// exporter's source did not hold the tree there, ErrNotHeld), and is a
// problem otherwise. A record at size 0 is held to the empty tree's root,
// which RFC 6962 fixes (SHA-256 of nothing): no entry or proof is needed,
// and none can be given (a consistency proof starts at size 1).
func (c *checker) tieAnchors() {
	for _, size := range slices.Sorted(maps.Keys(c.rootsAt)) {
		root, byProof := c.proven[size], true
		switch {
		case size == 0:
			root, byProof = log.EmptyRoot(), false
		case c.reachable(size):
			if !c.treeOK {
				continue // the entries' problem is reported
			}
			root, byProof = c.entryRoots[size], false
		}
		if root == nil {
			// Export writes a proof for every size that needs one, but
			// past the checkpoint only where its source held the tree
			// (ErrNotHeld): a consistency.json without a proof for a size
			// within the checkpoint was changed.
			if _, ok := c.m.Files[ConsistencyFile]; ok && size < c.cp.Size {
				c.bad(ConsistencyFile, "holds no valid proof for size %d, which %s anchors", size, c.rootsAt[size][0].file)
			}
			continue
		}
		for _, a := range c.rootsAt[size] {
			switch {
			case bytes.Equal(a.root, root):
				c.rep.AnchorsOnEntries++
				if byProof {
					c.rep.AnchorsByProof++
				}
			case size == 0:
				c.bad(a.file, "anchors root %x at size 0, but the empty tree's root is %x (RFC 6962): the log signed two trees of one size", a.root, root)
			case !byProof:
				c.bad(a.file, "anchors root %x at size %d, but the bundle's entries recompute root %x there: the log signed two trees of one size", a.root, size, root)
			case size < c.cp.Size:
				c.bad(a.file, "anchors root %x at size %d, but the checkpoint's tree has root %x there (%s): the log signed two trees of one size", a.root, size, root, ConsistencyFile)
			default:
				c.bad(a.file, "anchors root %x at size %d, but %s proves root %x there to extend the checkpoint's tree: the anchored tree is not shown to extend it (a fork)", a.root, size, ConsistencyFile, root)
			}
		}
	}
}

// readTree parses tree.json: the compact ranges either side of the
// exported entries.
func (c *checker) readTree() bool {
	var tree Tree
	tb := c.read(TreeFile)
	if tb == nil {
		return false
	}
	if err := json.Unmarshal(tb, &tree); err != nil {
		c.bad(TreeFile, "does not parse: %v", err)
		return false
	}
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	left, ok1 := decodeHashes(tree.Left)
	right, ok2 := decodeHashes(tree.Right)
	var err1, err2 error
	c.rng, err1 = rf.NewRange(0, c.m.From, left)
	c.rightRng, err2 = rf.NewRange(c.m.To, c.cp.Size, right)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		c.bad(TreeFile, "is not the compact ranges [0, %d) and [%d, %d)", c.m.From, c.m.To, c.cp.Size)
		return false
	}
	c.entryRoots = map[uint64][]byte{}
	if _, ok := c.rootsAt[c.m.From]; ok {
		c.entryRoots[c.m.From] = log.RangeRoot(c.m.From, left)
	}
	return true
}

// noteEntryRoot notes the root the entries give at size, when an anchor
// record anchors that size.
func (c *checker) noteEntryRoot(size uint64) {
	if _, ok := c.rootsAt[size]; ok {
		c.entryRoots[size], _ = c.rng.GetRootHash(nil)
	}
}
