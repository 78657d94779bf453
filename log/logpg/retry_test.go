package logpg

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// openLogged opens a store on dsn whose log lines t collects, with its
// listener stopped (its refreshes would take pooled connections, dead or
// not, while the test decides which a commit meets), committing in two
// round trips, and with no ping of the connections commits take (the
// pool pings one idle for over a second, which would find it dead before
// the commit does on a slow machine).
func openLogged(t *testing.T, dsn string) (*Store, func() []string) {
	t.Helper()
	return openLoggedWith(t, dsn, Options{})
}

// openLoggedWith is openLogged with options o (its Logf is replaced).
func openLoggedWith(t *testing.T, dsn string, o Options) (*Store, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	s, err := Open(t.Context(), dsn, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	s.stop()
	s.follow.Wait()
	s.testingOnlyTrips = 2
	s.testingOnlyNoPing = true
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// fillPool makes the pool hold as many idle connections as it may, and
// returns their backends' pids.
func fillPool(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	n := int(pool.Config().MaxConns)
	var conns []*pgxpool.Conn
	for range n {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var pids []string
	for _, c := range conns {
		pids = append(pids, fmt.Sprint(c.Conn().PgConn().PID()))
		c.Release()
	}
	if idle := pool.Stat().IdleConns(); int(idle) != n {
		t.Fatalf("the pool holds %d idle connections, want %d", idle, n)
	}
	return pids
}

// terminate terminates the backends pids (from psql) and waits until
// they are gone, so that what uses their connections next meets dead
// connections, not dying ones.
func terminate(t *testing.T, dsn string, pids []string) {
	t.Helper()
	got := pgtest.Psql(t, dsn, fmt.Sprintf("SELECT count(*) FROM unnest(ARRAY[%s]) AS pid WHERE pg_terminate_backend(pid, 30000)", strings.Join(pids, ",")))
	if got != fmt.Sprint(len(pids)) {
		t.Fatalf("terminated %s of the %d backends", got, len(pids))
	}
}

// retries returns the log lines saying a commit or a read tried another
// connection.
func retries(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "trying another connection") {
			out = append(out, l)
		}
	}
	return out
}

// checkReopened opens the log anew, which checks the stored state against
// the rows (Open), and checks it holds want, as s does.
func checkReopened(t *testing.T, s *Store, dsn string, want log.State) {
	t.Helper()
	again := open(t, dsn)
	defer again.Close()
	for i, h := range []*Store{again, s} {
		st, err := h.Latest(t.Context())
		if err != nil {
			t.Fatalf("handle %d: Latest: %v", i, err)
		}
		if st.Size != want.Size || !bytes.Equal(st.Checkpoint, want.Checkpoint) {
			t.Fatalf("handle %d holds size %d (checkpoint %q), want %d (%q)", i, st.Size, st.Checkpoint, want.Size, want.Checkpoint)
		}
	}
}

// TestDeadPooledConnections: every idle connection of the pool has its
// backend terminated (pg_terminate_backend, from psql) between two
// commits. The second commit meets them one by one, each failing its
// first round trip, which writes nothing; it takes another each time and
// commits on the fresh one the pool opens, with no error.
func TestDeadPooledConnections(t *testing.T) {
	dsn := pgtest.DSN(t)
	s, lines := openLogged(t, dsn)
	commitShared(t, s, "before", 3)
	pids := fillPool(t, s.pool)
	terminate(t, dsn, pids)

	var want log.State
	err := s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
		b := buildOn(t, st, "after", 2)
		want = b.State
		return b, nil
	})
	if err != nil {
		t.Fatalf("commit after the pool's backends were terminated: %v", err)
	}
	if r := retries(lines()); len(r) != len(pids) {
		t.Fatalf("the commit tried another connection %d times, want %d (one per dead connection): %q", len(r), len(pids), r)
	}
	if want.Size != 5 {
		t.Fatalf("the commit built on size %d, want 3", want.Size-2)
	}
	checkReopened(t, s, dsn, want)
}

// TestRestartBetweenCommits: the server restarts (pg_ctl stop -m
// immediate, start) between two commits; every pooled connection is dead,
// and the second commit takes them one by one and commits on a fresh one,
// with no error.
func TestRestartBetweenCommits(t *testing.T) {
	c := pgtest.NewCluster(t)
	s, lines := openLogged(t, c.DSN)
	commitShared(t, s, "before", 3)
	pids := fillPool(t, s.pool)
	c.Stop("immediate")
	c.Start()

	var want log.State
	err := s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
		b := buildOn(t, st, "after", 2)
		want = b.State
		return b, nil
	})
	if err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	if r := retries(lines()); len(r) != len(pids) {
		t.Fatalf("the commit tried another connection %d times, want %d (one per dead connection): %q", len(r), len(pids), r)
	}
	checkReopened(t, s, c.DSN, want)
}

// resetProxy forwards TCP connections to a PostgreSQL server and resets
// the client side of all of them at once (RST, SO_LINGER 0), as a
// middlebox that drops idle connections does: the client's kernel then
// fails the next write before it sends a byte.
type resetProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	pairs  [][2]*net.TCPConn // client side, server side
	wg     sync.WaitGroup
}

// newResetProxy starts a proxy to the server of dsn and returns it with a
// DSN that connects through it.
func newResetProxy(t *testing.T, dsn string) (*resetProxy, string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln, target: u.Host}
	t.Cleanup(func() { ln.Close(); p.reset(); p.wg.Wait() })
	p.wg.Go(p.accept)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *resetProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pair := [2]*net.TCPConn{c.(*net.TCPConn), s.(*net.TCPConn)}
		p.mu.Lock()
		p.pairs = append(p.pairs, pair)
		p.mu.Unlock()
		for i := range 2 {
			p.wg.Go(func() {
				io.Copy(pair[1-i], pair[i])
				pair[0].Close()
				pair[1].Close()
			})
		}
	}
}

// reset resets every connection's client side and closes its server side.
func (p *resetProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pair := range p.pairs {
		pair[0].SetLinger(0)
		pair[0].Close()
		pair[1].Close()
	}
	p.pairs = nil
}

// TestResetPooledConnections: every pooled connection is reset between
// two commits, so that writing the next commit's first round trip fails
// before a byte is sent (pgconn.SafeToRetry), in one round trip (where
// COMMIT is in it) and in two. The commit takes another connection each
// time, without reading back an outcome that is known, and commits on a
// fresh one, with no error.
func TestResetPooledConnections(t *testing.T) {
	for _, trips := range []int{1, 2} {
		t.Run(fmt.Sprintf("trips=%d", trips), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			proxy, via := newResetProxy(t, dsn)
			s, lines := openLogged(t, via)
			s.testingOnlyTrips = trips
			commitShared(t, s, "before", 1)
			pids := fillPool(t, s.pool)
			proxy.reset()

			var want log.State
			err := s.CommitShared(t.Context(), nil, func(st log.State, _ []bool) (*log.Batch, error) {
				b := buildOn(t, st, "after", 2)
				want = b.State
				return b, nil
			})
			if err != nil {
				t.Fatalf("commit after the pool's connections were reset: %v", err)
			}
			r := retries(lines())
			if len(r) != len(pids) {
				t.Fatalf("the commit tried another connection %d times, want %d (one per reset connection): %q", len(r), len(pids), r)
			}
			t.Logf("first retry: %s", r[0])
			checkReopened(t, s, dsn, want)
		})
	}
}
