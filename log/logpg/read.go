package logpg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/entryrun"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/transparency-dev/merkle/compact"
)

// rerun runs fn on a connection from the pool: every read of the log after
// Open goes through it, and the blob writes, each of which is the same
// run once or twice. A pooled connection may have died while idle (its
// backend terminated, the server restarted): the pool pings only a
// connection idle for over a second, and writing to a socket the server
// closed succeeds, so the reply is what finds it dead. So fn, whose
// connection died while ctx is live, takes another and runs again (a
// read changes nothing the log holds; a read of the newest state may write
// a flush record, which another flush repeats harmlessly), bounded as a
// commit is (connTries), which a fresh connection ends: the pool destroys
// each dead connection as it is released. An error the server answered
// with while the session goes on (a statement refused, a timeout) leaves
// the connection open and goes up at once, as does fn's own, and a read
// that handed rows to its caller before it failed (handedOut) is not run
// again. A database that does not answer within Options.ResolveTimeout
// (all tries together), one that could give no connection, or whose last
// try died too, makes it report the store unavailable (log.ErrUnavailable).
func (s *Store) rerun(ctx context.Context, what string, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	bctx, cancel := context.WithTimeout(ctx, s.resolve)
	defer cancel()
	tries := s.connTries()
	for try := 1; ; try++ {
		pc, err := s.pool.Acquire(context.WithValue(bctx, idleKey{}, &acquired{noPing: s.testingOnlyNoPing}))
		err = s.noUser(err)
		if err == nil {
			err = fn(bctx, pc.Conn())
			dead := err != nil && pc.Conn().IsClosed()
			pc.Release()
			var h *handedOut
			if errors.As(err, &h) {
				return h.err
			}
			if !dead {
				if err != nil && bctx.Err() != nil && ctx.Err() == nil {
					return fmt.Errorf("%w: the database did not answer within %v: %w", log.ErrUnavailable, s.resolve, err)
				}
				return err
			}
		}
		switch {
		case ctx.Err() != nil:
			return err
		case bctx.Err() != nil:
			return fmt.Errorf("%w: the database did not answer within %v: %w", log.ErrUnavailable, s.resolve, err)
		case pc == nil || try == tries:
			return fmt.Errorf("%w: %w", log.ErrUnavailable, err)
		}
		s.logf("logpg: %s: %v; it is the same run again, trying another connection (%d of %d tries)", what, err, try+1, tries)
	}
}

// handedOut is the error (err) of a read that had handed rows to its
// caller before it failed: [Store.read] does not run it again, which
// would hand them again.
type handedOut struct{ err error }

func (e *handedOut) Error() string { return e.err.Error() }
func (e *handedOut) Unwrap() error { return e.err }

// Entries implements [log.Storage.Entries].
func (s *Store) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	v, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	v = s.atLeast(ctx, v, end)
	if err := entryrun.Check(start, end, v.Size); err != nil {
		return nil, err
	}
	run := entryrun.New(start, end, v.Size, ErrCorrupt)
	if start == end {
		return run.Entries()
	}
	var bad error // what the run refused: the rows contradict the log
	err = s.rerun(ctx, "reading entries", func(ctx context.Context, conn *pgx.Conn) error {
		run = entryrun.New(start, end, v.Size, ErrCorrupt)
		rows, err := conn.Query(ctx, sqlEntries, int64(start), int64(end))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var idx int64
			var e []byte
			if err := rows.Scan(&idx, &e); err != nil {
				return err
			}
			if bad = run.Add(uint64(idx), e); bad != nil {
				return bad
			}
		}
		return rows.Err()
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, fmt.Errorf("reading entries [%d, %d): %w", start, end, err)
	}
	return run.Entries()
}

// ReadNodes implements [log.Storage.ReadNodes]. It answers from the nodes
// it keeps in memory, and reads the rest in one query.
func (s *Store) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	v, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	var need uint64
	for _, id := range ids {
		if id.Level < 64 {
			need = max(need, (id.Index+1)<<id.Level)
		}
	}
	v = s.atLeast(ctx, v, need)
	for _, id := range ids {
		if !hot.Committed(id, v.Size) {
			return nil, fmt.Errorf("node (%d, %d) in a log of size %d: %w", id.Level, id.Index, v.Size, log.ErrNotFound)
		}
	}
	return s.readNodes(ctx, v.hot, ids)
}

// readNodes reads nodes known to be committed.
func (s *Store) readNodes(ctx context.Context, hot *hot.Nodes, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	slab := make([]byte, hashSize*len(ids))
	var levels []int16
	var idxs []int64
	var rest []int
	for i, id := range ids {
		out[i] = slab[i*hashSize : (i+1)*hashSize : (i+1)*hashSize]
		if hot.Read(id, out[i]) {
			continue
		}
		levels = append(levels, int16(id.Level))
		idxs = append(idxs, int64(id.Index))
		rest = append(rest, i)
	}
	if len(rest) == 0 {
		return out, nil
	}
	var found map[compact.NodeID][]byte
	var bad error // a malformed node
	err := s.rerun(ctx, "reading nodes", func(ctx context.Context, conn *pgx.Conn) error {
		found = make(map[compact.NodeID][]byte, len(rest))
		rows, err := conn.Query(ctx, sqlNodes, levels, idxs)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var lvl int16
			var idx int64
			var h []byte
			if err := rows.Scan(&lvl, &idx, &h); err != nil {
				return err
			}
			if len(h) != hashSize {
				bad = fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, lvl, idx, len(h))
				return bad
			}
			found[compact.NewNodeID(uint(lvl), uint64(idx))] = h
		}
		return rows.Err()
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	for _, i := range rest {
		h, ok := found[ids[i]]
		if !ok {
			return nil, fmt.Errorf("node (%d, %d): %w", ids[i].Level, ids[i].Index, log.ErrNotFound)
		}
		copy(out[i], h)
	}
	return out, nil
}

// LeafIndex implements [log.Storage.LeafIndex]. Of several entries with the
// same leaf hash, it returns the first.
func (s *Store) LeafIndex(ctx context.Context, leafHash []byte) (uint64, error) {
	v, err := s.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer s.calls.Done()
	notFound := fmt.Errorf("leaf hash %x: %w", leafHash, log.ErrNotFound)
	if len(leafHash) != hashSize {
		return 0, notFound
	}
	lookup := func(size uint64) (uint64, error) {
		var idx int64
		err := s.rerun(ctx, "looking up a leaf hash", func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, sqlLeafIndex, leafHash, int64(size)).Scan(&idx)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, notFound
		} else if err != nil {
			return 0, fmt.Errorf("looking up leaf hash: %w", err)
		}
		return uint64(idx), nil
	}
	idx, err := lookup(v.Size)
	if errors.Is(err, log.ErrNotFound) {
		// Another writer may have just committed it.
		if w := s.atLeast(ctx, v, v.Size+1); w.Size > v.Size {
			return lookup(w.Size)
		}
	}
	return idx, err
}

// Checkpoint implements [log.Storage.Checkpoint].
func (s *Store) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	v, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	v = s.atLeast(ctx, v, size)
	return entryrun.Checkpoint(size, v.Size, func() ([]byte, bool, error) {
		var note []byte
		err := s.rerun(ctx, "reading a checkpoint", func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, sqlCheckpoint, int64(size)).Scan(&note)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return note, err == nil, err
	})
}

// Checkpoints implements [log.Storage.Checkpoints]. Close waits for it to
// return, so fn must not close the store.
func (s *Store) Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error {
	v, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.calls.Done()
	if from > v.Size || v.Size == 0 {
		return nil
	}
	// Read in pages, so that fn does not hold a connection for long.
	const page = 1024
	next := int64(from)
	type cp struct {
		size int64
		note []byte
	}
	for {
		var got []cp
		err := s.rerun(ctx, "reading checkpoints", func(ctx context.Context, conn *pgx.Conn) error {
			got = got[:0]
			rows, err := conn.Query(ctx, sqlCheckpoints+` LIMIT `+fmt.Sprint(page), next, int64(v.Size))
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var c cp
				if err := rows.Scan(&c.size, &c.note); err != nil {
					return err
				}
				got = append(got, c)
			}
			return rows.Err()
		})
		if err != nil {
			return fmt.Errorf("reading checkpoints: %w", err)
		}
		for _, c := range got {
			if err := fn(uint64(c.size), c.note); err != nil {
				return err
			}
		}
		if len(got) < page {
			return nil
		}
		next = got[len(got)-1].size + 1
	}
}

// FenceKeys calls fn with every row of the fence keys (provlog_keys: the
// index of the last entry committed under each key; see log.Fence), in
// order of key, and returns the log's size in the same snapshot: for an
// audit, which checks each row against the entries. A row that no entry
// accounts for fences appends off that should pass (a task nobody can
// accept), or lets through what it should fence off.
func (s *Store) FenceKeys(ctx context.Context, fn func(key string, last uint64) error) (size uint64, err error) {
	if _, err := s.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.calls.Done()
	err = s.rerun(ctx, "reading the fence keys", func(ctx context.Context, conn *pgx.Conn) error {
		handed := false
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var n int64
			if err := tx.QueryRow(ctx, sqlReadSize).Scan(&n); err != nil {
				return err
			}
			size = uint64(n)
			rows, err := tx.Query(ctx, sqlFenceKeys)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var key string
				var last int64
				if err := rows.Scan(&key, &last); err != nil {
					return err
				}
				if last < 0 {
					return fmt.Errorf("%w: fence key %q: last is %d", ErrCorrupt, key, last)
				}
				handed = true
				if err := fn(key, uint64(last)); err != nil {
					return err
				}
			}
			return rows.Err()
		})
		if err != nil && handed {
			return &handedOut{err}
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reading the fence keys: %w", err)
	}
	return size, nil
}
