package logpebble

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log/internal/hot"
)

// maxHotNodes bounds the upper levels of the tree a Store keeps in memory:
// 2^17 hashes, 4 MiB.
//
// Every inclusion or consistency proof needs about one node per level, and
// the upper levels are few: with levels 4 and up of a million-entry log in
// memory (levels 3 and up of a 200,000-entry one), the rest of an inclusion
// proof lies within the 16 leaves around the leaf, one seek in Pebble. A
// log of up to 104,863 entries is held whole (levels 1 and 2 hashed from
// the leaves when read); a bigger one keeps the highest levels that fit
// (hot.Min).
const maxHotNodes = 1 << 17

// loadHot reads the hot levels of a log of this size from db, a tile
// level (keys.go) at a time: it seeks each node, but in key order across
// the tile level's levels, so that each data block is read once. Read
// level by level, each level read again most of the blocks the level
// below it had read, since a level's nodes lie among the lower levels'
// (BenchmarkOpen, a million entries, 2 shared cores: loadHot took 0.37
// to 0.49 s, now 0.17 to 0.20; Open 0.36 to 0.46 s, now 0.18 to 0.23).
// Half of what remains is reading the blocks. Stepping with Next over the
// lower levels' keys between the nodes wanted, two million of them, cost
// more than seeking over them (0.25 to 0.27 s): Pebble seeks forward
// within the block it holds.
//
// A missing node ends its level's in-memory part (the rest is read from
// Pebble when needed); a node that is not hashSize bytes is ErrCorrupt:
// the first such, before any gap, of the lowest level that has one.
func loadHot(db reader, size, maxNodes uint64) (*hot.Nodes, error) {
	l := hot.NewLoader(size, maxNodes)
	lo, hi := l.Levels()
	if lo >= hi {
		return l.Nodes(), nil
	}
	lower, upper := kindBounds(kindNode)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for t := lo / 8; t*8 < hi; t++ {
		if err := loadTileLevel(it, l, max(lo, 8*t), min(hi, 8*t+8)); err != nil {
			return nil, err
		}
	}
	return l.Nodes(), nil
}

// loadTileLevel hands l the nodes of levels [lo, hi), all of one tile
// level, reading their keys in order: the nodes of a level follow each
// other in key order, with those of the tile level's other levels between
// them, so the next node wanted is the least of each level's next key.
func loadTileLevel(it *pebble.Iterator, l *hot.Loader, lo, hi uint) error {
	type level struct {
		lvl         uint
		next, count uint64
		key         []byte // the key of node (lvl, next)
	}
	var levels []*level // the levels still being read
	for lvl := lo; lvl < hi; lvl++ {
		if count := l.Count(lvl); count > 0 {
			key := appendNodeKey(make([]byte, 0, nodeKeySize), compact.NewNodeID(lvl, 0))
			levels = append(levels, &level{lvl: lvl, count: count, key: key})
		}
	}
	var corrupt error
	var corruptLvl uint
	for len(levels) > 0 {
		m := 0
		for i := range levels {
			if bytes.Compare(levels[i].key, levels[m].key) < 0 {
				m = i
			}
		}
		v := levels[m]
		if !it.SeekGE(v.key) {
			break // the rest of each level is missing
		}
		if !bytes.Equal(it.Key(), v.key) {
			levels = slices.Delete(levels, m, m+1) // a gap
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if len(val) != hashSize {
			if corrupt == nil || v.lvl < corruptLvl {
				corruptLvl, corrupt = v.lvl, fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, v.lvl, v.next, len(val))
			}
			levels = slices.Delete(levels, m, m+1)
			continue
		}
		l.Put(v.lvl, val)
		if v.next++; v.next == v.count {
			levels = slices.Delete(levels, m, m+1)
		} else {
			v.key = appendNodeKey(v.key[:0], compact.NewNodeID(v.lvl, v.next))
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return corrupt
}
