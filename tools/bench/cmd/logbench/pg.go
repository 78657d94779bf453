package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/server"
)

// provlog on PostgreSQL: logpg stores, each behind its own server.Sequencer,
// as sidecars on one log are. implPG is one sidecar; implPG2 is two, each in
// its own process (the second is a peer process, peer.go) with its own
// connection pool, sequencer and commits, contending for the log's row lock.
// In implPG2's throughput runs each sidecar has half the appenders in its
// own process (as the single sidecars' appenders are in theirs); in its
// other runs, and in implPG2Sock's, the appenders are all in this process
// and spread over the two round robin, those of the peer sending each
// append over a Unix socket.
const (
	implPG      = "postgres"
	implPG2     = "postgres×2"
	implPG2Sock = "postgres×2 via socket"
	implPG2RTT  = "postgres×2+rtt" // through a delay proxy (-postgres-rtt)
	implPGRTT   = "postgres+rtt"   // one sidecar through a delay proxy (-latency-rounds with -postgres-rtt)
)

type pgImpl struct {
	dsn    string // with search_path set to the run's own schema
	admin  string
	schema string
	stores []*logpg.Store // this process's: one
	seqs   []*server.Sequencer
	cars   []sidecar // the local sequencer, then the peer's, if any
	peer   *peerSidecar
	next   atomic.Uint64
	proxy  *delayProxy // nil, or what the local store connects through
	// commits logs the local store's commits (breakdown.go).
	commits commitLog
}

// openPG makes a fresh schema for this run on the database at dsn and opens
// n sidecars (1 or 2) on it: one here, the second in a peer process started
// with peerSpec.
func openPG(ctx context.Context, dsn string, n int, rtt time.Duration, s note.Signer, v note.Verifier, peerSpec spec) (*pgImpl, error) {
	if dsn == "" {
		return nil, errors.New("no -postgres DSN")
	}
	var rb [6]byte
	rand.Read(rb[:])
	p := &pgImpl{admin: dsn, schema: "logbench_" + hex.EncodeToString(rb[:])}
	if err := p.exec(ctx, "CREATE SCHEMA "+p.schema); err != nil {
		return nil, err
	}
	storeDSN := dsn
	if rtt > 0 {
		var err error
		if storeDSN, p.proxy, err = viaDelay(dsn, rtt); err != nil {
			p.close(ctx)
			return nil, err
		}
	}
	var err error
	if p.dsn, err = inSchema(storeDSN, p.schema); err != nil {
		p.close(ctx)
		return nil, err
	}
	st, err := logpg.Open(ctx, p.dsn, &logpg.Options{OnCommit: p.commits.add})
	if err != nil {
		p.close(ctx)
		return nil, fmt.Errorf("logpg.Open: %w", err)
	}
	p.stores = append(p.stores, st)
	seq, err := server.OpenSequencer(ctx, st, s, v, nil)
	if err != nil {
		p.close(ctx)
		return nil, fmt.Errorf("OpenSequencer: %w", err)
	}
	p.seqs = append(p.seqs, seq)
	p.cars = append(p.cars, localSidecar{seq})
	if n > 1 {
		direct, err := inSchema(dsn, p.schema)
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		peerSpec.Postgres, peerSpec.PostgresRTT = direct, rtt
		if p.peer, err = startPeer(peerSpec); err != nil {
			p.close(ctx)
			return nil, err
		}
		p.cars = append(p.cars, p.peer)
	}
	return p, nil
}

// inSchema returns dsn with its search_path set to schema.
func inSchema(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("options", "-c search_path="+schema)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), nil
}

func (p *pgImpl) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// splitLoop is implPG2's throughput loop: half the appenders (and
// entries) in this process on the local sidecar, half in the peer on its
// own, at once. The rate is all entries over the longer of the two runs.
func (p *pgImpl) splitLoop(ctx context.Context, sp spec) (int, time.Duration, error) {
	local := (sp.Appenders + 1) / 2
	ln := sp.N * local / sp.Appenders
	ran := make(chan peerRan, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := p.peer.run(peerRun{Appenders: sp.Appenders - local, N: sp.N - ln, Base: 1 << 41, MaxTime: sp.MaxTime})
		ran <- r
		errc <- err
	}()
	var deadline time.Time
	if sp.MaxTime > 0 {
		deadline = time.Now().Add(sp.MaxTime)
	}
	n, el, err := runLoop(local, ln, deadline, func(seq uint64) error {
		_, err := p.cars[0].append(ctx, makeEntry(seq))
		return err
	})
	r, perr := <-ran, <-errc
	if err == nil {
		err = perr
	}
	return n + r.Count, max(el, r.Elapsed), err
}

func (p *pgImpl) car() sidecar { return p.cars[p.next.Add(1)%uint64(len(p.cars))] }

func (p *pgImpl) add(ctx context.Context, e []byte) (uint64, error) {
	r, err := p.car().append(ctx, e)
	if err != nil {
		return 0, err
	}
	return r.Index, nil
}

func (p *pgImpl) published(ctx context.Context, size uint64) ([]byte, error) {
	st, err := p.stores[0].Latest(ctx)
	if err != nil {
		return nil, err
	}
	if st.Size < size {
		return nil, fmt.Errorf("postgres: log size %d below %d after every append returned", st.Size, size)
	}
	return st.Checkpoint, nil
}

func (p *pgImpl) addAndProve(ctx context.Context, e []byte) (uint64, [][]byte, []byte, error) {
	idx, proof, cp, _, err := p.addAndProveVia(ctx, e)
	return idx, proof, cp, err
}

// addAndProveVia is addAndProve, also saying whether the local sidecar
// took the append.
func (p *pgImpl) addAndProveVia(ctx context.Context, e []byte) (uint64, [][]byte, []byte, bool, error) {
	car := p.car()
	_, local := car.(localSidecar)
	r, err := car.append(ctx, e)
	if err != nil {
		return 0, nil, nil, local, err
	}
	return r.Index, r.Proof, r.Checkpoint, local, nil
}

func (p *pgImpl) prover(ctx context.Context, size uint64) func(uint64) ([][]byte, error) {
	st := p.stores[p.next.Add(1)%uint64(len(p.stores))]
	return func(i uint64) ([][]byte, error) { return log.ProveInclusion(ctx, st, i, size) }
}

func (p *pgImpl) readEntries(ctx context.Context, size uint64, fn func(uint64, []byte) error) error {
	for start := uint64(0); start < size; start += 256 {
		end := min(start+256, size)
		es, err := p.stores[0].Entries(ctx, start, end)
		if err != nil {
			return err
		}
		for i, e := range es {
			if err := fn(start+uint64(i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *pgImpl) diagnostics() string {
	var a, c, ns uint64
	for _, s := range p.cars {
		st, err := s.stats()
		if err != nil {
			return err.Error()
		}
		a, c, ns = a+st.Appends, c+st.Commits, ns+st.CommitNanos
	}
	if c == 0 {
		return ""
	}
	d := fmt.Sprintf("%.1f entries/commit, %.2f ms/commit", float64(a)/float64(c), float64(ns)/float64(c)/1e6)
	p.commits.mu.Lock()
	one := 0
	for _, ct := range p.commits.ct {
		if ct.OneTrip {
			one++
		}
	}
	n := len(p.commits.ct)
	var lock, build, write []time.Duration
	for _, ct := range p.commits.ct {
		lock, build, write = append(lock, ct.Lock), append(build, ct.Build), append(write, ct.Write)
	}
	p.commits.mu.Unlock()
	if n > 0 {
		d += fmt.Sprintf(", %.0f%% of the local sidecar's %d commits in one round trip; its medians: lock %s, build %s, write %s",
			100*float64(one)/float64(n), n, medianDur(lock).Round(10*time.Microsecond), medianDur(build).Round(10*time.Microsecond), medianDur(write).Round(10*time.Microsecond))
	}
	return d
}

// medianDur is the median of d (sorted in place), 0 if d is empty.
func medianDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// diskBytes is the size of the run's tables with their indexes and TOAST
// (pg_total_relation_size); the WAL is the cluster's and not counted.
func (p *pgImpl) diskBytes(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, p.admin)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, p.schema).Scan(&n)
	return n, err
}

func (p *pgImpl) close(ctx context.Context) error {
	var errs []error
	if p.peer != nil {
		errs = append(errs, p.peer.close())
	}
	for _, s := range p.seqs {
		errs = append(errs, s.Close())
	}
	for _, s := range p.stores {
		errs = append(errs, s.Close())
	}
	errs = append(errs, p.exec(ctx, "DROP SCHEMA IF EXISTS "+p.schema+" CASCADE"))
	if p.proxy != nil {
		p.proxy.close()
	}
	return errors.Join(errs...)
}

// delayProxy forwards TCP connections to target, holding every chunk of
// bytes for oneWay in each direction: a network between the sidecar and
// the database with a round trip of 2*oneWay, on loopback. Chunks are
// pipelined (a chunk sent behind another is not delayed twice), as on a
// real link.
type delayProxy struct {
	ln     net.Listener
	target string
	oneWay time.Duration
}

func startDelayProxy(target string, oneWay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, oneWay: oneWay}
	go p.serve()
	return p, nil
}

func (p *delayProxy) addr() string { return p.ln.Addr().String() }

func (p *delayProxy) close() { p.ln.Close() }

func (p *delayProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			go p.pipe(s, c)
			p.pipe(c, s)
		}()
	}
}

// pipe copies from src to dst, each chunk oneWay after it was read. It
// waits with nanosleep: time.Sleep waits at least until the runtime's
// next poll, which on Linux has a granularity of a millisecond (a 0.5 ms
// Sleep took 1.09 ms here), and made a "1 ms" proxy add some 2.2 ms a
// round trip until session 10.
func (p *delayProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for c := range q {
			sleepUntil(c.at)
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer close(q)
	for {
		b := make([]byte, 64<<10)
		n, err := src.Read(b)
		if n > 0 {
			q <- chunk{time.Now().Add(p.oneWay), b[:n]}
		}
		if err != nil {
			return
		}
	}
}

// sleepUntil blocks the calling thread in nanosleep until t (a few tens
// of microseconds late, the kernel's timer slack).
func sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// pingRTT is the median of n round trips of SELECT 1 on a connection to
// dsn.
func pingRTT(ctx context.Context, dsn string, n int) (time.Duration, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	d := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
		d = append(d, time.Since(t))
	}
	return medianDur(d), nil
}

// measuredRTT says what the delay proxy adds to a round trip, measured:
// SELECT 1 through it against directly.
func measuredRTT(ctx context.Context, dsn string, rtt time.Duration) (string, error) {
	via, p, err := viaDelay(dsn, rtt)
	if err != nil {
		return "", err
	}
	defer p.close()
	direct, err := pingRTT(ctx, dsn, 300)
	if err != nil {
		return "", err
	}
	delayed, err := pingRTT(ctx, via, 300)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("the delay proxy (-postgres-rtt %v), measured: SELECT 1 p50 %v through it, %v direct: it adds %v a round trip", rtt, delayed.Round(time.Microsecond), direct.Round(time.Microsecond), (delayed - direct).Round(time.Microsecond)), nil
}

// viaDelay rewrites dsn to go through a delay proxy with this round trip.
func viaDelay(dsn string, rtt time.Duration) (string, *delayProxy, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, err
	}
	p, err := startDelayProxy(u.Host, rtt/2)
	if err != nil {
		return "", nil, err
	}
	u.Host = p.addr()
	return u.String(), p, nil
}
