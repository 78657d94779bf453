package logpebble

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log/internal/hot"
)

// maxHotNodes bounds the upper levels of the tree a Store keeps in memory:
// 2^17 hashes, 4 MiB (up to 8 MiB while a level's slice grows).
//
// Every inclusion or consistency proof needs about one node per level, and
// the upper levels are few: with levels 4 and up of a million-entry log in
// memory (levels 3 and up of a 200,000-entry one), the rest of an inclusion
// proof lies within the 16 leaves around the leaf, one seek in Pebble. A
// log of up to 104,863 entries is held whole (levels 1 and 2 hashed from
// the leaves when read); a bigger one keeps the highest levels that fit
// (hot.Min).
const maxHotNodes = 1 << 17

// loadHot reads the hot levels of a log of this size from db, level by
// level, each in key order.
func loadHot(db reader, size, max uint64) (*hot.Nodes, error) {
	if size>>hot.Min(size, max) == 0 {
		return hot.Load(size, max, nil)
	}
	lower, upper := kindBounds(kindNode)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	key := make([]byte, 0, nodeKeySize)
	return hot.Load(size, max, func(lvl uint, count uint64, put func([]byte)) error {
		for i := range count {
			key = appendNodeKey(key[:0], compact.NewNodeID(lvl, i))
			if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
				if err := it.Error(); err != nil {
					return err
				}
				break // a gap: the rest of this level is read from Pebble
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if len(v) != hashSize {
				return fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, lvl, i, len(v))
			}
			put(v)
		}
		return nil
	})
}
