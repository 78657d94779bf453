// Package hot keeps the upper levels of a log's Merkle tree in memory, for
// the stores under log/ (logpebble, logpg): every inclusion or consistency
// proof needs about one node per level, and the upper levels are few, so
// holding them turns most of a proof's node reads into slice lookups.
//
// A [Nodes] is immutable once published: the next one, made by
// [Nodes.With] for a grown tree, may extend the same arrays past the
// lengths this one's readers look at, never within them.
package hot

import (
	"crypto/sha256"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
)

const hashSize = sha256.Size

// Min returns the lowest level kept in memory for a tree of this size when
// at most max nodes are kept: the lowest level L such that levels L and up
// hold at most max nodes. It returns 64, no level, if max is 0.
func Min(size, max uint64) uint {
	if max == 0 {
		return 64
	}
	var n uint64 // the nodes of levels l and up
	for l := 63; l >= 0; l-- {
		n += size >> uint(l)
		if n > max {
			return uint(l) + 1
		}
	}
	return 0
}

// Nodes holds levels min and up of a tree: levels[i] is the hashes of
// nodes (min+i, 0), (min+i, 1), … concatenated, as far as they are known
// and contiguous; the store reads the rest.
type Nodes struct {
	max    uint64 // the most nodes to keep
	min    uint   // Min(size, max)
	levels [][]byte
}

// Empty returns the hot nodes of an empty tree, keeping at most max nodes
// as the tree grows.
func Empty(max uint64) *Nodes { return &Nodes{max: max, min: Min(0, max)} }

// Max returns the most nodes h keeps.
func (h *Nodes) Max() uint64 { return h.max }

// Get returns the hash of node id, if held.
func (h *Nodes) Get(id compact.NodeID) ([]byte, bool) {
	if id.Level < h.min || id.Level-h.min >= uint(len(h.levels)) {
		return nil, false
	}
	l := h.levels[id.Level-h.min]
	if id.Index >= uint64(len(l)/hashSize) {
		return nil, false
	}
	return l[id.Index*hashSize : (id.Index+1)*hashSize], true
}

// With returns the hot nodes of the tree grown to size by these nodes,
// each level's in index order. A node that does not extend its level
// contiguously is left to the store, as are all later nodes of that level.
func (h *Nodes) With(size uint64, nodes []log.Node) *Nodes {
	n := &Nodes{max: h.max, min: Min(size, h.max)}
	// The lowest hot level only rises with the size, so n keeps a suffix
	// of h's levels.
	if h.min <= n.min && n.min-h.min < uint(len(h.levels)) {
		n.levels = append([][]byte(nil), h.levels[n.min-h.min:]...)
	}
	for _, nd := range nodes {
		if nd.ID.Level < n.min || nd.ID.Level >= 64 {
			continue
		}
		i := int(nd.ID.Level - n.min)
		for len(n.levels) <= i {
			n.levels = append(n.levels, nil)
		}
		if l := n.levels[i]; nd.ID.Index == uint64(len(l)/hashSize) {
			n.levels[i] = append(l, nd.Hash...)
		}
	}
	return n
}

// Load builds the hot nodes of a stored tree of this size, keeping at most
// max nodes. level reads the first count nodes of a level, concatenated; it
// may return fewer (a gap: the rest of that level is read from the store),
// never more.
func Load(size, max uint64, level func(lvl uint, count uint64) ([]byte, error)) (*Nodes, error) {
	h := &Nodes{max: max, min: Min(size, max)}
	for lvl := h.min; lvl < 64 && size>>lvl > 0; lvl++ {
		count := size >> lvl
		l, err := level(lvl, count)
		if err != nil {
			return nil, err
		}
		if len(l)%hashSize != 0 || uint64(len(l)/hashSize) > count {
			l = l[:min(uint64(len(l))/hashSize, count)*hashSize]
		}
		h.levels = append(h.levels, l)
	}
	return h, nil
}

// Committed reports whether node id is complete in a log of the given
// size: both stores hold, and serve, only complete nodes.
func Committed(id compact.NodeID, size uint64) bool {
	return id.Level < 64 && id.Index < size>>id.Level
}
