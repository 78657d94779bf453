package logpebble

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
)

// maxHotNodes bounds the upper levels of the tree a Store keeps in memory:
// 2^17 hashes, 4 MiB (up to 8 MiB while a level's slice grows).
//
// Every inclusion or consistency proof needs about one node per level, and
// the upper levels are few: with levels 4 and up of a million-entry log in
// memory (levels 2 and up of a 200,000-entry one), the rest of an inclusion
// proof lies within the 16 leaves around the leaf, one seek in Pebble. Level
// 0 is never kept; a log too big for all the levels above it keeps the
// highest levels that fit.
const maxHotNodes = 1 << 17

// hotLevel returns the lowest level kept in memory for a log of this size
// when at most max nodes are kept: levels L and up hold fewer than
// size>>(L-1) nodes. It returns 64, no level, if max is 0.
func hotLevel(size uint64, max uint64) uint {
	if max == 0 {
		return 64
	}
	l := uint(1)
	for size>>(l-1) > max {
		l++
	}
	return l
}

// hotNodes holds levels min and up of the tree: levels[i] is the hashes of
// nodes (min+i, 0), (min+i, 1), … concatenated, as far as they are
// committed and contiguous. A hotNodes is not changed once published; the
// next one may extend its slices in place, past their length, which no
// reader of this one looks at.
type hotNodes struct {
	max    uint64 // the most nodes to keep
	min    uint   // hotLevel(size, max)
	levels [][]byte
}

// get returns the hash of node id, if held.
func (h *hotNodes) get(id compact.NodeID) ([]byte, bool) {
	if id.Level < h.min || id.Level-h.min >= uint(len(h.levels)) {
		return nil, false
	}
	l := h.levels[id.Level-h.min]
	if id.Index >= uint64(len(l)/hashSize) {
		return nil, false
	}
	return l[id.Index*hashSize : (id.Index+1)*hashSize], true
}

// with returns the hot nodes of a log grown to size by a batch with these
// nodes. A node that does not extend its level contiguously is left to
// Pebble, as are all later nodes of that level.
func (h *hotNodes) with(size uint64, nodes []log.Node) *hotNodes {
	n := &hotNodes{max: h.max, min: hotLevel(size, h.max)}
	// The hot level only rises with the size, so n keeps a suffix of h.
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

// loadHot reads the hot levels of a log of this size from db, level by
// level, each in key order.
func loadHot(db reader, size, max uint64) (*hotNodes, error) {
	h := &hotNodes{max: max, min: hotLevel(size, max)}
	if size>>h.min == 0 {
		return h, nil
	}
	lower, upper := kindBounds(kindNode)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	key := make([]byte, 0, nodeKeySize)
	for lvl := h.min; lvl < 64 && size>>lvl > 0; lvl++ {
		count := size >> lvl
		l := make([]byte, 0, count*hashSize)
		for i := range count {
			key = appendNodeKey(key[:0], compact.NewNodeID(lvl, i))
			if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
				if err := it.Error(); err != nil {
					return nil, err
				}
				break // a gap: the rest of this level is read from Pebble
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, err
			}
			if len(v) != hashSize {
				return nil, fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, lvl, i, len(v))
			}
			l = append(l, v...)
		}
		h.levels = append(h.levels, l)
	}
	return h, nil
}
