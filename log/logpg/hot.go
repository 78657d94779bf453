package logpg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/provlog/provlog/log/internal/hot"
)

// DefaultMaxHotNodes bounds the tree nodes a [Store] keeps in memory:
// 5·2^18 hashes, 40 MiB. A proof read from memory costs no round trip to
// the database, so the upper levels are kept, as many as fit: all of a
// tree of up to 2^20 (1,048,576) leaves, whose levels 1 and 2 are hashed
// from the leaves when read (hot.Min), then levels 3 and up of one of up
// to four million, and so on; a proof then reads the few lowest levels in
// one query.
const DefaultMaxHotNodes = 5 << 18

// loadHot reads the hot levels of a tree of this size, one query a level.
func loadHot(ctx context.Context, pool *pgxpool.Pool, size, max uint64) (*hot.Nodes, error) {
	return hot.Load(size, max, func(lvl uint, count uint64, put func([]byte)) error {
		rows, err := pool.Query(ctx, sqlLevel, int16(lvl), int64(count))
		if err != nil {
			return err
		}
		defer rows.Close()
		var next int64
		var hash []byte
		for rows.Next() {
			var idx int64
			if err := rows.Scan(&idx, &hash); err != nil {
				return err
			}
			if idx != next || len(hash) != hashSize {
				return fmt.Errorf("%w: node (%d, %d) is missing or malformed", ErrCorrupt, lvl, next)
			}
			put(hash)
			next++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if uint64(next) != count {
			return fmt.Errorf("%w: node (%d, %d) of a tree of size %d is missing", ErrCorrupt, lvl, next, size)
		}
		return nil
	})
}
