package logpg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/provlog/provlog/log"
)

// lockAt is what a commit in one round trip has the server check once it
// holds the state row's lock (sqlLockAt): the state row is still size,
// compact and checkpoint, byte for byte, and no entry under keys[i] was
// committed at or after afters[i].
type lockAt struct {
	size                uint64
	compact, checkpoint []byte
	keys                []string
	afters              []int64
}

// commitOneTrip tries to commit in one round trip, building on known, the
// newest state this handle knows: the batch is built before the state
// row's lock is taken, and the server, once it holds the lock, checks
// that the state row is still known and that no fence tripped, then
// writes the rows and commits, all in the same round trip (schema.go,
// Fencing). So the lock is held only for the server's own work, not
// across a round trip to the client and the build.
//
// It reports done if the commit is over (err says how it ended), and
// !done with a nil error if the server refused because another writer
// committed since known, or a fence tripped: nothing was written, the
// transaction is left failed (the caller's next round trip rolls it
// back), and the caller commits in two round trips. So does it if build
// refuses on known or has nothing to write on it: either may differ on the
// newest state.
func (s *Store) commitOneTrip(ctx context.Context, conn *pgx.Conn, known log.State, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error), tm *timer) (done bool, _ error) {
	// Assume no fence tripped in the store; the server checks that.
	fenced := fencedOf(fences, nil)
	b, err := build(cloneState(known), fenced)
	if err != nil || b == nil {
		tm.mark(&tm.Build)
		tm.retry()
		return false, nil
	}
	tm.mark(&tm.Build)
	if err := b.Check(known.Size); err != nil {
		return true, fmt.Errorf("refusing batch: %w", err)
	}
	batchKeys, batchLast, err := fenceKeys(fences, fenced, b)
	if err != nil {
		return true, err
	}
	at := &lockAt{size: known.Size, compact: []byte{}, checkpoint: []byte{}}
	for _, h := range known.Range {
		at.compact = append(at.compact, h...)
	}
	if known.Size > 0 {
		at.checkpoint = known.Checkpoint
	}
	for i, f := range fences {
		if fenced[i] {
			continue
		}
		for _, k := range f.Keys() {
			at.keys, at.afters = append(at.keys, k), append(at.afters, int64(f.After))
		}
	}

	if s.testingOnlyBeforeWrite != nil {
		s.testingOnlyBeforeWrite(conn.PgConn().PID())
	}
	err = s.write(ctx, conn, b, batchKeys, batchLast, at)
	if err == nil && s.testingOnlyAfterWrite != nil {
		err = s.testingOnlyAfterWrite()
	}
	if err != nil && pgconn.SafeToRetry(err) && !errors.Is(err, errNotFlushed) && conn.IsClosed() && ctx.Err() == nil {
		// pgx sent no byte of the pipeline (SafeToRetry promises that
		// the error came before any was written; pgx writes the whole
		// pipeline at once, at its Sync) and the connection is closed:
		// nothing reached the server, the outcome is known, and another
		// connection may do. (Only a prepare of statements this
		// connection had not used may have gone before; it writes
		// nothing.)
		tm.mark(&tm.Write)
		tm.retry()
		return true, &deadConn{unavailable("committing", err)}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == codeMoved || pe.Code == codeFenced) {
		// Refused under the lock: nothing was written.
		if pe.Code == codeMoved {
			s.noOther = false // until a commit finds no other writer's
		}
		tm.mark(&tm.Write)
		tm.retry()
		return false, nil
	}
	if err := s.outcome(conn, b, err); err != nil {
		return true, err
	}
	s.publish(cloneState(b.State), b.Nodes)
	s.lastEntries = len(b.Entries)
	if tm.mark(&tm.Write); s.onCommit != nil {
		tm.OneTrip = true
		s.onCommit(tm.done(len(b.Entries)))
	}
	return true, nil
}
