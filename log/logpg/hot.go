package logpg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
)

// DefaultMaxHotNodes bounds the tree nodes a [Store] keeps in memory: 2^21
// hashes, 64 MiB. A proof read from memory costs no round trip to the
// database, so the upper levels are kept, as many as fit: all of a tree of
// up to a million leaves, levels 1 and up of one of up to two million, and
// so on; a proof then reads at most the few lowest levels in one query.
const DefaultMaxHotNodes = 1 << 21

// hotMin returns the lowest level kept for a tree of this size: the
// lowest level L such that levels L and up hold at most max nodes. It
// returns 64, no level, if max is 0.
func hotMin(size, max uint64) uint {
	if max == 0 {
		return 64
	}
	for l := uint(0); l < 64; l++ {
		var n uint64
		for k := l; k < 64; k++ {
			n += size >> k
		}
		if n <= max {
			return l
		}
	}
	return 64
}

// hotNodes holds levels min and up of the tree: levels[i] is the hashes of
// nodes (min+i, 0), (min+i, 1), … concatenated. A hotNodes is never changed
// once published; the next one may extend the same arrays past the lengths
// this one's readers look at.
type hotNodes struct {
	max    uint64
	min    uint
	levels [][]byte
}

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

// with returns the hot nodes of the tree grown to size by these nodes,
// which must be every node completed in growing it, in any order within a
// level but each level's in index order. A node that does not extend its
// level leaves that level to the database from there on.
func (h *hotNodes) with(size uint64, nodes []log.Node) *hotNodes {
	n := &hotNodes{max: h.max, min: hotMin(size, h.max)}
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

// loadHot reads the hot levels of a tree of this size, one query a level.
func loadHot(ctx context.Context, pool *pgxpool.Pool, size, max uint64) (*hotNodes, error) {
	h := &hotNodes{max: max, min: hotMin(size, max)}
	for lvl := h.min; lvl < 64 && size>>lvl > 0; lvl++ {
		count := size >> lvl
		l := make([]byte, 0, count*hashSize)
		rows, err := pool.Query(ctx, sqlLevel, int16(lvl), int64(count))
		if err != nil {
			return nil, err
		}
		var next int64
		for rows.Next() {
			var idx int64
			var hash []byte
			if err := rows.Scan(&idx, &hash); err != nil {
				rows.Close()
				return nil, err
			}
			if idx != next || len(hash) != hashSize {
				rows.Close()
				return nil, fmt.Errorf("%w: node (%d, %d) is missing or malformed", ErrCorrupt, lvl, next)
			}
			l = append(l, hash...)
			next++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if uint64(next) != count {
			return nil, fmt.Errorf("%w: node (%d, %d) of a tree of size %d is missing", ErrCorrupt, lvl, next, size)
		}
		h.levels = append(h.levels, l)
	}
	return h, nil
}
