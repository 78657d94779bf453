package logpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/provlog/provlog/log"
)

// Commit implements [log.Storage.Commit]: b is committed if it starts at
// the stored size, whoever committed last. A batch refused because
// another writer committed first writes nothing, and the error says so.
func (s *Store) Commit(ctx context.Context, b *log.Batch) error {
	if b == nil {
		return errors.New("refusing batch: nil batch")
	}
	return s.CommitShared(ctx, nil, func(st log.State, _ []bool) (*log.Batch, error) {
		if b.Start != st.Size {
			return nil, fmt.Errorf("refusing batch: it starts at %d, but the log has size %d (another writer may have committed first)", b.Start, st.Size)
		}
		return b, nil
	})
}

// CommitShared implements [log.SharedStorage.CommitShared]. See schema.go
// for its round trips (one when this handle knows the newest state, two
// when it must read what others appended), and for how an unknown outcome
// is resolved.
//
// A pooled connection may have died while idle (its backend terminated,
// the server restarted): the pool pings only a connection idle for over a
// second, and writing to a socket the server closed succeeds, so the first
// round trip is what finds it dead. A commit whose connection dies before
// anything that could commit was sent on it (deadConn) takes another and
// tries again, at most once per connection the pool may hold and once
// more, which a fresh connection ends: the pool destroys each dead one as
// it is released. Then it reports the store unavailable. Nothing is tried
// again once the outcome may be unknown.
func (s *Store) CommitShared(ctx context.Context, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error)) error {
	if _, err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.calls.Done()
	tm := timer{t: time.Now()}
	s.advance.Lock()
	defer s.advance.Unlock()
	s.committing.Store(true)
	defer s.committing.Store(false)
	known, err := s.mayCommit()
	if err != nil {
		return err
	}
	// A database that stops answering (a hung host, a network that drops
	// packets) leaves the connection open and a round trip waiting without
	// end: the commit's are bounded by ResolveTimeout, and one cut off so
	// is judged as a lost connection's (nothing written before COMMIT was
	// sent; else read back, or the store stops).
	ctx, cancel := context.WithTimeout(ctx, s.resolve)
	defer cancel()
	tries := s.connTries()
	for try := 1; ; try++ {
		err := s.commitOn(ctx, known, fences, build, &tm)
		var dead *deadConn
		if !errors.As(err, &dead) {
			return err
		}
		if try == tries || ctx.Err() != nil {
			return dead.err
		}
		s.logf("logpg: %v; nothing was written, trying another connection (%d of %d tries)", dead.err, try+1, tries)
	}
}

// connTries bounds the connections a commit or a read takes when each it
// took died: one for each the pool may hold, all of which may be dead,
// and one more, which the pool opens anew.
func (s *Store) connTries() int { return int(s.cfg.MaxConns) + 1 }

// commitOn is one attempt of CommitShared, on a connection from the pool.
// The caller holds s.advance.
func (s *Store) commitOn(ctx context.Context, known log.State, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error), tm *timer) error {
	var idle time.Duration
	pc, err := s.pool.Acquire(context.WithValue(ctx, idleKey{}, &acquired{idle: &idle, noPing: s.testingOnlyNoPing}))
	if err != nil {
		return unavailable("committing", s.noUser(err))
	}
	conn := pc.Conn()
	defer func() {
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			// A transaction is open or failed, and nothing of it was
			// committed: end it, or drop the connection if even that
			// fails.
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
				conn.Close(rctx)
			}
			cancel()
		}
		pc.Release()
	}()
	tm.add(&tm.Wait)
	if s.mayOneTrip(known, idle) {
		done, err := s.commitOneTrip(ctx, conn, known, fences, build, tm)
		if done || err != nil {
			return err
		}
	}
	return s.commitLocked(ctx, conn, known, fences, build, tm)
}

// deadConn is the error (err) of a commit attempt whose connection died
// before anything that could commit reached the server: CommitShared
// takes another connection and tries again.
type deadConn struct{ err error }

func (e *deadConn) Error() string { return e.err.Error() }
func (e *deadConn) Unwrap() error { return e.err }

// commitLocked is a commit in two round trips: lock the state row and
// read what others committed since known, build on that, write.
func (s *Store) commitLocked(ctx context.Context, conn *pgx.Conn, known log.State, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error), tm *timer) error {
	// Round trip 1: lock the state, read what others appended and the
	// fence keys.
	st, leaves, last, err := s.lockState(ctx, conn, known.Size, fences)
	if err != nil {
		return err
	}
	tm.mark(&tm.Lock)
	nodes, err := extend(known, st, leaves)
	if err != nil {
		s.fail(err)
		return err
	}
	// What another writer committed (st, nodes) is published only after a
	// flush covers it (see schema.go).
	s.noOther = st.Size == known.Size

	fenced := fencedOf(fences, last)
	b, err := build(cloneState(st), fenced)
	if err != nil {
		return err
	}
	tm.mark(&tm.Build)
	if b == nil && st.Size == known.Size {
		return nil // rolled back; known is durable
	}
	if b == nil {
		// Nothing to write, but the caller decided on st (which fences
		// hold): it must be durable before the caller answers on it.
		if err := s.endEmpty(ctx, conn); err != nil {
			return err
		}
		s.publish(cloneState(st), nodes)
		return nil
	}
	if err := b.Check(st.Size); err != nil {
		return fmt.Errorf("refusing batch: %w", err)
	}
	batchKeys, batchLast, err := fenceKeys(fences, fenced, b)
	if err != nil {
		return err
	}

	// Round trip 2: write it all and commit.
	if s.testingOnlyBeforeWrite != nil {
		s.testingOnlyBeforeWrite(conn.PgConn().PID())
	}
	err = s.write(ctx, conn, b, batchKeys, batchLast, nil)
	if err == nil && s.testingOnlyAfterWrite != nil {
		err = s.testingOnlyAfterWrite()
	}
	if err := s.outcome(conn, b, err); err != nil {
		return err
	}
	s.publish(cloneState(b.State), append(nodes, b.Nodes...))
	s.lastEntries = len(b.Entries)
	if tm.mark(&tm.Write); s.onCommit != nil {
		s.onCommit(tm.done(len(b.Entries)))
	}
	return nil
}

// mayOneTrip says whether a commit building on known, on a connection
// that was idle for idle, tries one round trip (schema.go, Fencing): only
// if the handle's last commit carried one entry, no other writer is known
// to have committed past known, no attempt was refused since a commit last
// found no other writer's, and the connection was used within the last
// oneTripIdle. The caller holds s.advance.
//
// The first condition keeps two round trips under load: while a commit
// waits for its first, the appends that arrive meanwhile join its batch
// (the sequencer builds after it), so that at 64 appenders one sidecar's
// commits carry some 60 entries, against some 35 in one round trip, and
// commit more entries a second (tools/bench/README.md, session 9). The
// last: a round trip that fails leaves the outcome unknown once COMMIT is
// in it, and a read-back waits for the database to come back; a commit in
// two round trips finds a connection or a server that died while it was
// idle in its first, before COMMIT is sent, and fails as unavailable.
func (s *Store) mayOneTrip(known log.State, idle time.Duration) bool {
	switch s.testingOnlyTrips {
	case 1:
		return true
	case 2:
		return false
	}
	return s.noOther && s.lastEntries <= 1 && known.Size >= s.heard.Load() && idle < s.maxIdle
}

// oneTripIdle is how recently a connection must have been used for a
// commit in one round trip on it (mayOneTrip): appends one at a time,
// back to back.
const oneTripIdle = 10 * time.Millisecond

// idleKey is the context key under which the pool's ShouldPing tells
// CommitShared how long the connection it acquires was idle (an
// *acquired).
type idleKey struct{}

// acquired is what the pool's ShouldPing and a commit's or a read's
// acquisition tell each other: how long the connection was idle (to a
// commit; nil for a read), and (a test hook) that it is not to be pinged
// however long that was.
type acquired struct {
	idle   *time.Duration
	noPing bool
}

// timer takes a commit's [CommitTimes].
type timer struct {
	CommitTimes
	t time.Time // the last mark
}

// mark sets *d to the time since the last mark.
func (tm *timer) mark(d *time.Duration) {
	now := time.Now()
	*d, tm.t = now.Sub(tm.t), now
}

// add adds to *d the time since the last mark.
func (tm *timer) add(d *time.Duration) {
	now := time.Now()
	*d, tm.t = *d+now.Sub(tm.t), now
}

// retry counts the time of a one-round-trip attempt that was refused
// (its build and round trip) as waiting, before the commit in two.
func (tm *timer) retry() {
	tm.Wait += tm.Build + tm.Write
	tm.Build, tm.Write = 0, 0
}

func (tm *timer) done(entries int) CommitTimes {
	tm.End, tm.Entries = tm.t, entries
	return tm.CommitTimes
}

// mayCommit returns the state a commit starts from, or why there is to be
// none.
func (s *Store) mayCommit() (log.State, error) {
	s.mu.Lock()
	known, failure := s.state, s.failure
	s.mu.Unlock()
	if s.readOnly {
		return known, fmt.Errorf("refusing to commit: %w", errReadOnly)
	}
	if failure != nil {
		return known, fmt.Errorf("refusing to commit to a failed log store: %w", failure)
	}
	return known, nil
}

// lockState is a commit's first round trip: it begins the transaction,
// locks the state row, and reads the leaf hashes appended since size and
// the last index of each fence key.
func (s *Store) lockState(ctx context.Context, conn *pgx.Conn, size uint64, fences []log.Fence) (log.State, [][]byte, map[string]int64, error) {
	var keys []string
	for _, f := range fences {
		keys = append(keys, f.Keys()...)
	}
	var st log.State
	var leaves [][]byte
	last := map[string]int64{}
	if conn.PgConn().TxStatus() != 'I' {
		// A commit in one round trip was refused, and its transaction
		// failed. (It cannot share the batch below: pgx prepares the
		// batch's new statements first, which a failed transaction
		// refuses.)
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return st, nil, nil, unavailable("committing: rolling back a refused commit", err)
		}
	}
	b1 := &pgx.Batch{}
	b1.Queue("BEGIN")
	b1.Queue(sqlAsyncCommit)
	b1.Queue(sqlLockState).QueryRow(func(row pgx.Row) (err error) { st, err = scanState(row); return err })
	b1.Queue(sqlLeavesFrom, int64(size)).Query(func(rows pgx.Rows) (err error) {
		leaves, err = scanLeaves(rows, size)
		return err
	})
	if len(keys) > 0 {
		b1.Queue(sqlKeys, keys).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k string
				var l int64
				if err := rows.Scan(&k, &l); err != nil {
					return err
				}
				last[k] = l
			}
			return rows.Err()
		})
	}
	if err := conn.SendBatch(ctx, b1).Close(); err != nil {
		if errors.Is(err, ErrCorrupt) {
			s.fail(err)
			return st, nil, nil, err
		}
		err = unavailable("committing: locking the log state", err)
		if conn.IsClosed() && ctx.Err() == nil {
			// The connection died, and not because ctx ended. Whatever
			// of this round trip reached the server began a
			// transaction that holds no COMMIT, which ends with its
			// session: nothing was written, and another connection may
			// do.
			return st, nil, nil, &deadConn{err}
		}
		return st, nil, nil, err
	}
	s.setUnreachable(nil) // the database answered, as publish would say
	return st, leaves, last, nil
}

// fencedOf says which appends are fenced: one of their keys was appended
// at or after their After, or an earlier append of the same commit has
// it.
func fencedOf(fences []log.Fence, last map[string]int64) []bool {
	if len(fences) == 0 {
		return nil
	}
	fenced := make([]bool, len(fences))
	seen := map[string]bool{}
	for i, f := range fences {
		for _, k := range f.Keys() {
			l, ok := last[k]
			if (ok && uint64(l) >= f.After) || seen[k] {
				fenced[i] = true
			}
			seen[k] = true
		}
	}
	return fenced
}

// fenceKeys returns the keys of batch b's unfenced appends and the index
// each gets (no key twice: fencedOf fences off a second append of a key),
// and refuses a batch whose entries are not one per unfenced
// append.
func fenceKeys(fences []log.Fence, fenced []bool, b *log.Batch) ([]string, []int64, error) {
	if len(fences) == 0 {
		return nil, nil, nil
	}
	var keys []string
	var last []int64
	n := 0
	for i, f := range fences {
		if fenced[i] {
			continue
		}
		for _, k := range f.Keys() {
			keys = append(keys, k)
			last = append(last, int64(b.Start)+int64(n))
		}
		n++
	}
	if n != len(b.Entries) {
		return nil, nil, fmt.Errorf("refusing batch: %d entries for %d unfenced appends", len(b.Entries), n)
	}
	return keys, last, nil
}

// outcome judges the error err of the round trip that wrote b and sent
// COMMIT: nil, committed; a statement the server refused, not committed
// (the transaction is left failed, for the caller to roll back); else the
// session ended, perhaps after COMMIT, and the outcome is read back (conn
// is closed). The error is nil only if b was committed.
func (s *Store) outcome(conn *pgx.Conn, b *log.Batch, err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotFlushed):
		// Committed: read back below, which flushes.
	case errors.As(err, &pe) && pe.Severity == "ERROR" && transient(pe.Code):
		// Refused for now (a statement or lock timeout, a deadlock or
		// serialization failure, a read-only or full database): nothing was
		// committed, and the next commit may pass. It stopped the log for
		// good.
		return unavailable(fmt.Sprintf("committing batch [%d, %d)", b.Start, b.State.Size), err)
	case (errors.As(err, &pe) && pe.Severity == "ERROR") || errors.Is(err, errNotCommitted):
		// The server refused a statement and the session goes on: the
		// transaction is aborted and nothing of it was committed. (A
		// FATAL or PANIC ends the session, possibly after COMMIT: that
		// outcome is read back, below.)
		return fmt.Errorf("committing batch [%d, %d): %w", b.Start, b.State.Size, err)
	}
	pid := conn.PgConn().PID()
	conn.Close(context.Background())
	ok, rerr := s.readBack(b, pid)
	if rerr != nil {
		err = fmt.Errorf("committing batch [%d, %d): the connection failed (%v) and the outcome could not be read back: %w", b.Start, b.State.Size, err, rerr)
		s.fail(err)
		return err
	}
	if !ok {
		return fmt.Errorf("committing batch [%d, %d): %w: the connection failed (%v); read back: not committed", b.Start, b.State.Size, log.ErrUnavailable, err)
	}
	s.logf("logpg: the connection failed during the commit of [%d, %d) (%v); read back: committed", b.Start, b.State.Size, err)
	return nil
}

// transient reports whether an ERROR of this SQLSTATE is one a retry may
// not meet: query_canceled (statement_timeout), lock_not_available
// (lock_timeout), too_many_connections, the transaction rollback class
// (serialization failure, deadlock), read_only_sql_transaction (a hot
// standby, or default_transaction_read_only: a failover's promotion or
// an operator makes the database writable again, and a restart of every
// sidecar would not) and disk_full (space freed on the database's disk
// lets the next commit pass, as a restart would not either).
func transient(code string) bool {
	return code == "57014" || code == "55P03" || code == "53300" || strings.HasPrefix(code, "40") || code == codeReadOnly || code == codeDiskFull
}

// codeDiskFull is disk_full: a statement of the transaction found no
// space for what it wrote; the transaction is aborted, nothing committed.
const codeDiskFull = "53100"

// codeReadOnly is read_only_sql_transaction, which the first write (or
// row lock) of a transaction meets on a database that takes no writes.
const codeReadOnly = "25006"

// unavailable is the error of a commit that wrote nothing and may pass
// later, in doing what: err wrapped in log.ErrUnavailable, and in
// log.ErrReadOnly too if the database takes no writes, or log.ErrDiskFull
// if its disk has no space, so that health and the appends' errors say
// which. Every such error of a commit, on whichever of its round trips,
// is made here.
func unavailable(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeReadOnly {
		return fmt.Errorf("%s: %w: %w: the database takes no writes (a hot standby, or default_transaction_read_only is on); nothing was written, and commits go through once it is writable again: %w",
			what, log.ErrUnavailable, log.ErrReadOnly, err)
	}
	if errors.As(err, &pe) && pe.Code == codeDiskFull {
		return fmt.Errorf("%s: %w: %w: the database's disk has no space left; nothing was written, and commits go through once it has: %w",
			what, log.ErrUnavailable, log.ErrDiskFull, err)
	}
	return fmt.Errorf("%s: %w: %w", what, log.ErrUnavailable, err)
}

var (
	errNotCommitted = errors.New("the server did not commit the transaction")
	errNotFlushed   = errors.New("the transaction was committed, but the flush after it failed")
)

// write sends the batch's rows and COMMIT in one round trip. With at set
// (a commit in one round trip), it begins the transaction and takes the
// state row's lock first, where the server checks that the log is still at
// the size b was built on and that no fence tripped (else it refuses, and
// nothing is written).
func (s *Store) write(ctx context.Context, conn *pgx.Conn, b *log.Batch, keys []string, last []int64, at *lockAt) error {
	n := len(b.Entries)
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = int64(b.Start) + int64(i)
	}
	var levels []int16
	var nidx []int64
	var hashes [][]byte
	for i, h := range b.LeafHashes {
		levels, nidx, hashes = append(levels, 0), append(nidx, idx[i]), append(hashes, h)
	}
	for _, nd := range b.Nodes {
		if nd.ID.Level == 0 {
			continue // written from b.LeafHashes, which Batch.Check found equal
		}
		levels, nidx, hashes = append(levels, int16(nd.ID.Level)), append(nidx, int64(nd.ID.Index)), append(hashes, nd.Hash)
	}
	rng := make([]byte, 0, hashSize*len(b.State.Range))
	for _, h := range b.State.Range {
		rng = append(rng, h...)
	}
	cp := b.State.Checkpoint
	if cp == nil {
		cp = []byte{}
	}
	var updated, committed bool
	q := &pgx.Batch{}
	if at != nil {
		q.Queue("BEGIN")
		q.Queue(sqlAsyncCommit)
		q.Queue(sqlLockAt, int64(at.size), at.compact, at.checkpoint, at.keys, at.afters)
	}
	q.Queue(sqlInsertEntries, idx, b.Entries)
	q.Queue(sqlInsertNodes, levels, nidx, hashes)
	q.Queue(sqlInsertCheckpoint, int64(b.State.Size), cp)
	q.Queue(sqlUpdateState, int64(b.Start), int64(b.State.Size), rng, cp).Exec(func(ct pgconn.CommandTag) error {
		updated = ct.RowsAffected() == 1
		return nil
	})
	if len(keys) > 0 {
		q.Queue(sqlUpsertKeys, keys, last)
	}
	q.Queue(sqlNotify, strconv.FormatUint(b.State.Size, 10))
	q.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		committed = ct.String() == "COMMIT"
		return nil
	})
	if !s.testingOnlySkipFlush {
		q.Queue(sqlFlush)
	}
	if err := conn.SendBatch(ctx, q).Close(); err != nil {
		if committed {
			// Committed, but not known to be durable: the outcome is
			// read back (which flushes) as if the reply were lost.
			return fmt.Errorf("%w: %w", errNotFlushed, err)
		}
		return err
	}
	if !updated || !committed {
		return fmt.Errorf("%w (state row updated: %v, COMMIT answered: %v)", errNotCommitted, updated, committed)
	}
	return nil
}

// endEmpty ends a commit that writes nothing: it rolls the transaction
// back and flushes, so that the state it read is durable.
func (s *Store) endEmpty(ctx context.Context, conn *pgx.Conn) error {
	q := &pgx.Batch{}
	q.Queue("ROLLBACK")
	q.Queue(sqlFlush)
	if err := conn.SendBatch(ctx, q).Close(); err != nil {
		conn.Close(context.Background())
		return unavailable("committing: making the state read durable", err)
	}
	return nil
}

// readBack resolves a commit whose outcome was lost with its connection,
// whose backend had process id pid: on a new connection it ends that
// backend if it still runs, waits for the state row's lock, which the old
// transaction holds until it ends, then looks for the batch's checkpoint.
// It retries until s.resolve has passed.
func (s *Store) readBack(b *log.Batch, pid uint32) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.resolve)
	defer cancel()
	var lastErr error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		ok, err := s.readBackOnce(ctx, b, pid)
		if err == nil {
			return ok, nil
		}
		if errors.Is(err, ErrCorrupt) {
			return false, err
		}
		lastErr = err
		s.logf("logpg: reading back the commit of [%d, %d): %v; retrying", b.Start, b.State.Size, err)
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("gave up after %v: %w", s.resolve, lastErr)
		case <-time.After(wait):
		}
	}
}

func (s *Store) readBackOnce(ctx context.Context, b *log.Batch, pid uint32) (bool, error) {
	cfg := s.cfg.ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, s.noUser(err)
	}
	defer conn.Close(context.Background())
	// The old backend may not have begun the transaction yet: its
	// pipeline may still be on the way (held by a proxy, or resent by
	// the network), and it would commit after a read that found nothing
	// (schema.go, Unknown outcomes). Once it is gone, nothing of its
	// can commit any more.
	var ended []bool
	rows, _ := conn.Query(ctx, sqlEndBackend, int32(pid))
	if ended, err = pgx.CollectRows(rows, pgx.RowTo[bool]); err != nil {
		return false, fmt.Errorf("ending the backend (pid %d) that sent the commit: %w", pid, err)
	}
	if len(ended) > 0 && !ended[0] {
		return false, fmt.Errorf("the backend (pid %d) that sent the commit is still running", pid)
	}
	var note []byte
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT FROM provlog_state WHERE id FOR SHARE`); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, sqlCheckpoint, int64(b.State.Size)).Scan(&note)
		if errors.Is(err, pgx.ErrNoRows) {
			note = nil
			err = nil
		}
		if err != nil {
			return err
		}
		// Committing this transaction flushes what it read.
		_, err = tx.Exec(ctx, sqlFlush)
		return err
	})
	if err != nil {
		return false, err
	}
	// Not committed if there is no checkpoint at the batch's size, even
	// if the log has grown past it: another writer's batch may span it.
	return note != nil && bytes.Equal(note, b.State.Checkpoint), nil
}
