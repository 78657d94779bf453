package logpg

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/log"
)

// listen keeps one connection listening on notifyChannel, which every
// commit notifies, and refreshes this handle's state on each notification,
// so that its followers (the sequencer's latest checkpoint) see other
// writers' commits within a round trip. It also refreshes every few
// seconds, and after reconnecting, in case a notification was missed.
func (s *Store) listen(ctx context.Context) {
	defer s.follow.Done()
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 5*time.Second) {
		if s.listenOnce(ctx) {
			wait = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// listenOnce listens until its connection fails or ctx is done, and
// reports whether it got as far as listening.
func (s *Store) listenOnce(ctx context.Context) bool {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
	if err != nil {
		if ctx.Err() == nil {
			s.setUnreachable(s.noUser(err))
		}
		return false
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		if ctx.Err() == nil {
			s.setUnreachable(err)
		}
		return false
	}
	s.checkWritable(ctx, conn)
	checked := time.Now()
	s.mu.Lock()
	s.unreachable = nil // reached; what checkWritable found stands
	s.mu.Unlock()
	s.refresh(ctx)
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && wctx.Err() == nil {
			return true // the connection failed; reconnect
		}
		if conn.IsClosed() {
			return true
		}
		if time.Since(checked) >= 5*time.Second {
			// Look again every 5 s, notified or not; read-only: ask a new
			// session next, as this one keeps the default it started with.
			if checked = time.Now(); !s.checkWritable(ctx, conn) {
				return true
			}
		}
		if n != nil {
			// Skip what this handle already knows (its own commits, and
			// sizes an earlier refresh passed).
			size, err := strconv.ParseUint(n.Payload, 10, 64)
			if err == nil {
				raise(&s.heard, size)
			}
			s.mu.Lock()
			known := s.state.Size
			s.mu.Unlock()
			if err == nil && size <= known {
				continue
			}
		}
		s.refresh(ctx)
	}
	return true
}

// checkWritable asks the listener's session whether the database takes
// writes: not a hot standby, and not read-only for a new session
// (default_transaction_read_only), and reports whether it found so. A
// failed question is left to the connection's next wait.
func (s *Store) checkWritable(ctx context.Context, conn *pgx.Conn) bool {
	var ro bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::bool`).Scan(&ro); err != nil {
		return true
	}
	var err error
	if ro {
		err = fmt.Errorf("%w: %w: the database takes no writes (a hot standby, or default_transaction_read_only is on); commits are refused until it does", log.ErrUnavailable, log.ErrReadOnly)
	}
	s.mu.Lock()
	s.noWrites = err
	s.mu.Unlock()
	return !ro
}

// refresh adopts the latest state if it is newer; failures are left to the
// next try (a corrupt state fails the store inside latest). A commit under
// way brings the state up to date itself, so refresh leaves it to that
// (and does not hold up the commit after it: latest holds s.advance only
// to publish).
func (s *Store) refresh(ctx context.Context) {
	if _, err := s.acquire(ctx); err != nil {
		return
	}
	defer s.calls.Done()
	if s.committing.Load() {
		return
	}
	if _, err := s.latest(ctx); err != nil && ctx.Err() == nil {
		s.logf("logpg: reading the latest state: %v", err)
	}
}

// raise makes *v at least x.
func raise(v *atomic.Uint64, x uint64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}
