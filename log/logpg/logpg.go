// Package logpg keeps a [log.Storage] in PostgreSQL (via pgx), so that any
// number of sidecars, on any number of hosts, serve one log. The schema and
// how commits are serialized and fenced are documented in schema.go.
//
// # Many writers
//
// A [Store] is a [log.SharedStorage]: every handle may commit, and
// PostgreSQL is the only coordinator. [Store.CommitShared] locks the state
// row, hands the caller the state whoever committed last left, and commits
// the batch the caller builds on it before the lock is released; the
// sequencer in log/server signs its checkpoint there. When appends come
// one at a time and the handle knows the newest state, it builds on that
// first and commits in one round trip, in which the server checks under
// the lock that the state is still the newest (schema.go). Handles learn of
// other writers' commits when they commit themselves, when a read asks for
// more than they know, and by LISTEN/NOTIFY, and they check every state
// they adopt against the one before it.
//
// # Durability
//
// A commit returns nil only after its transaction is committed and its
// WAL flushed: the flush waits as synchronous_commit is configured, or as
// "on" where that is off (sqlSyncCommit). It holds the state row's lock only until its commit
// record is written, not flushed, and nothing is trusted before a flush
// covers it. An outcome lost with the connection is resolved by reading
// back, never guessed; see schema.go.
//
// # Memory and speed
//
// A Store keeps the upper levels of the tree in memory, up to
// Options.MaxHotNodes hashes ([DefaultMaxHotNodes], 40 MiB): proofs and
// tiles read from memory, and what lies below in one query.
package logpg

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

const hashSize = 32

var (
	// ErrCorrupt is returned (wrapped) when the stored data contradicts
	// itself or a state this handle knew. Nothing is repaired.
	ErrCorrupt = errors.New("log store is corrupt")

	// ErrNoLog is returned (wrapped) by a read-only Open of a database
	// that holds no log: some of its tables are missing.
	ErrNoLog = errors.New("log store not found")

	errClosed   = errors.New("log store is closed")
	errReadOnly = errors.New("the log store was opened read-only")
)

// Options tune a [Store]. A nil *Options, and zero fields, mean the
// defaults.
type Options struct {
	// MaxHotNodes bounds the tree nodes kept in memory (default
	// DefaultMaxHotNodes); negative keeps none.
	MaxHotNodes int64
	// ResolveTimeout bounds how long a commit waits for the database's
	// answers, and how long one whose outcome was lost with its
	// connection (or not answered in time) keeps trying to read it back
	// (default one minute): a database that stops answering refuses an
	// append within twice that, and stops the handle if a commit's outcome
	// stays unknown.
	ResolveTimeout time.Duration
	// Logf receives the store's own log lines (nil: discarded).
	Logf func(format string, args ...any)
	// Errorf receives the line saying the store stopped its commits
	// (nil: Logf), for an operator who reads errors only.
	Errorf func(format string, args ...any)
	// ReadOnly opens the log for reading only: Open creates no tables
	// and fails, naming them, if any is missing; every transaction of
	// the handle is read only (default_transaction_read_only), so the
	// database refuses a write; and a commit is refused before it is
	// sent. The read-only commands (audit, export, evidence, tasks)
	// open a shared log so.
	ReadOnly bool
	// OnCommit, if set, is told how long the parts of each commit that
	// wrote a batch took (benchmarks break the latency down with it).
	OnCommit func(CommitTimes)
}

// CommitTimes is how long the parts of one commit took ([Options.OnCommit]).
type CommitTimes struct {
	// Wait is for the handle's commit lock and a pooled connection, and
	// a one-round-trip attempt that the server refused (its build and
	// round trip) before the commit in two.
	Wait time.Duration
	// Lock is round trip 1 of a commit in two: BEGIN, the state row's
	// lock (waiting for other writers' commits included) and the leaves
	// they appended. Zero for a commit in one round trip.
	Lock time.Duration
	// Build is the caller's build of the batch (the sequencer's
	// signature of its checkpoint included).
	Build time.Duration
	// Write is round trip 2 (the rows, COMMIT and the flush), or for a
	// commit in one round trip that round trip (BEGIN, the state row's
	// lock and its check, the rows, COMMIT and the flush).
	Write time.Duration
	// OneTrip says the commit took one round trip (see schema.go).
	OneTrip bool
	// End is when the commit was over; Entries the batch's entries.
	End     time.Time
	Entries int
}

// A Store is a [log.SharedStorage] in PostgreSQL. It is safe for concurrent
// use.
type Store struct {
	pool     *pgxpool.Pool
	cfg      *pgxpool.Config
	resolve  time.Duration
	logf     func(format string, args ...any)
	errorf   func(format string, args ...any) // the line saying commits stopped
	onCommit func(CommitTimes)
	stop     context.CancelFunc
	follow   sync.WaitGroup

	// advance serializes whatever moves the state: commits, and the
	// publishing of what a refresh read.
	advance sync.Mutex
	// committing is set while a commit is under way; a refresh is left
	// to it.
	committing atomic.Bool
	// What decides whether a commit tries one round trip (mayOneTrip):
	// noOther is cleared when such a commit finds that another writer
	// committed first, and set when a commit in two finds none did;
	// lastEntries is the entries of this handle's last commit (both
	// guarded by advance); heard is the largest size another writer's
	// notification announced (listen.go).
	noOther     bool
	lastEntries int
	heard       atomic.Uint64
	maxIdle     time.Duration // oneTripIdle; tests change it

	readOnly bool

	mu      sync.Mutex
	closed  bool
	state   log.State // the newest state this handle knows; never changed
	hot     *hot.Nodes
	failure error
	// unreachable is why the listener cannot reach the database (nil
	// while it listens): what an idle sidecar knows of the database.
	unreachable error
	// noWrites is set while the listener's session finds the database
	// takes no writes (a hot standby, or default_transaction_read_only):
	// an idle sidecar says so before a commit is refused. Reads of the
	// state, which such a database answers, leave it; the listener's next
	// look, or a commit that locks the state, clears it.
	noWrites  error
	calls     sync.WaitGroup
	followers []func(log.State)

	// Test hooks around the second round trip of a commit: before it,
	// with the backend's pid (to terminate it); after it, an error to
	// report instead of its success (a reply lost with the connection).
	testingOnlyBeforeWrite func(pid uint32)
	testingOnlyAfterWrite  func() error
	// Test hook: a commit leaves out its flush (as if it had not run yet).
	testingOnlySkipFlush bool
	// Test hook: 1, every commit tries one round trip; 2, none does.
	testingOnlyTrips int
	// Test hook: the pool pings no connection a commit or a read takes,
	// however long it was idle (so a dead one is found by its reply).
	testingOnlyNoPing bool
}

var _ log.SharedStorage = (*Store)(nil)

// Open connects to the database at dsn (a PostgreSQL connection string or
// URL), creates the tables if they are missing (unless opts.ReadOnly), and
// checks the stored state. Several handles, in one process or many, may be
// open on one log.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxHotNodes == 0 {
		o.MaxHotNodes = DefaultMaxHotNodes
	}
	if o.MaxHotNodes < 0 {
		o.MaxHotNodes = 0
	}
	if o.ResolveTimeout <= 0 {
		o.ResolveTimeout = time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Errorf == nil {
		o.Errorf = o.Logf
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening log store: parsing the PostgreSQL connection string: %w", parseFailure(dsn, err))
	}
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["idle_in_transaction_session_timeout"]; !ok {
		rp["idle_in_transaction_session_timeout"] = "10s"
	}
	rp["application_name"] = "provlog"
	if o.ReadOnly {
		rp["default_transaction_read_only"] = "on"
	}
	cfg.ShouldPing = func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
		if a, ok := ctx.Value(idleKey{}).(*acquired); ok {
			if a.idle != nil {
				*a.idle = p.IdleDuration // how long the connection a commit gets was idle
			}
			if a.noPing {
				return false
			}
		}
		return p.IdleDuration > time.Second // pgxpool's default
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening log store on %s: %w", where(&cfg.ConnConfig.Config), cutUser(err, cfg.ConnConfig.User))
	}
	s := &Store{pool: pool, cfg: cfg, resolve: o.ResolveTimeout, logf: o.Logf, errorf: o.Errorf, readOnly: o.ReadOnly, onCommit: o.OnCommit, noOther: true, lastEntries: 1, maxIdle: oneTripIdle}
	if err := s.load(ctx, uint64(o.MaxHotNodes)); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening log store on %s: %w", where(&cfg.ConnConfig.Config), s.noUser(err))
	}
	fctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.follow.Add(1)
	go s.listen(fctx)
	return s, nil
}

// load creates the schema if needed (checks that it is there, if
// read-only), reads the state and checks it.
func (s *Store) load(ctx context.Context, maxHot uint64) error {
	if s.readOnly {
		if err := s.checkTables(ctx); err != nil {
			return err
		}
	} else if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		// Tables a newer build wrote are left as they are: the DDL below
		// would replace its functions with this build's.
		if err := checkNotNewer(ctx, tx); err != nil {
			return err
		}
		for _, q := range schemaDDL {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		var newer *newerError
		if errors.As(err, &newer) {
			return err
		}
		return fmt.Errorf("creating tables: %w", err)
	}
	// The state and what is checked against it are read in one
	// snapshot: another writer may commit meanwhile.
	var st log.State
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if st, err = scanState(tx.QueryRow(ctx, sqlReadState)); err != nil {
			return err
		}
		return checkState(ctx, tx, st)
	})
	if err != nil {
		return err
	}
	// What was read may be another writer's commit not yet durable: a
	// flush after the read covers it.
	if _, err := s.pool.Exec(ctx, sqlFlush); err != nil {
		return fmt.Errorf("flushing the state read: %w", err)
	}
	hot, err := loadHot(ctx, s.pool, st.Size, maxHot)
	if err != nil {
		return fmt.Errorf("reading the upper levels of the tree: %w", err)
	}
	// The compact range is the stored nodes it names.
	ids := compact.RangeNodes(0, st.Size, nil)
	got, err := s.readNodes(ctx, hot, ids)
	if err != nil {
		if errors.Is(err, log.ErrNotFound) {
			return fmt.Errorf("%w: a node of the compact range of size %d is missing", ErrCorrupt, st.Size)
		}
		return err
	}
	for i := range ids {
		if !bytes.Equal(got[i], st.Range[i]) {
			return fmt.Errorf("%w: node (%d, %d) differs from the compact range of size %d", ErrCorrupt, ids[i].Level, ids[i].Index, st.Size)
		}
	}
	s.state, s.hot = st, hot
	return nil
}

// checkState checks the rows at the end of the log against st, the state
// row read in tx's snapshot: the last entry and leaf hash are there,
// nothing lies past them, and the checkpoint stored for st's size is the
// state row's.
func checkState(ctx context.Context, tx pgx.Tx, st log.State) error {
	if st.Size == 0 {
		return nil
	}
	var entry, leaf, entriesPast, leavesPast, cpsPast bool
	var cp []byte
	if err := tx.QueryRow(ctx, sqlOpenCheck, int64(st.Size)).Scan(&entry, &leaf, &entriesPast, &leavesPast, &cpsPast, &cp); err != nil {
		return fmt.Errorf("checking the state: %w", err)
	}
	switch {
	case !entry:
		return fmt.Errorf("%w: state says size %d, but entry %d is missing", ErrCorrupt, st.Size, st.Size-1)
	case !leaf:
		return fmt.Errorf("%w: state says size %d, but leaf hash %d is missing", ErrCorrupt, st.Size, st.Size-1)
	case entriesPast:
		return fmt.Errorf("%w: entries past the size %d", ErrCorrupt, st.Size)
	case leavesPast:
		return fmt.Errorf("%w: leaf hashes (provlog_nodes, level 0) past the size %d", ErrCorrupt, st.Size)
	case cpsPast:
		return fmt.Errorf("%w: checkpoints past the size %d", ErrCorrupt, st.Size)
	case cp == nil:
		return fmt.Errorf("%w: checkpoint for size %d is missing", ErrCorrupt, st.Size)
	case !bytes.Equal(cp, st.Checkpoint):
		return fmt.Errorf("%w: the checkpoint stored for size %d (provlog_checkpoints) differs from the state row's", ErrCorrupt, st.Size)
	}
	return nil
}

// checkTables fails, naming them, if any of the log's tables is missing.
func (s *Store) checkTables(ctx context.Context) error {
	var missing []string
	var path string
	if err := s.pool.QueryRow(ctx, sqlMissingTables, schemaTables).Scan(&missing, &path); err != nil {
		return fmt.Errorf("looking for the log's tables: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: no provlog log here: table %s missing (search_path %s); a sidecar creates the tables when it first starts on this database (provlog serve with store:); check the URL and its search_path", ErrNoLog, strings.Join(missing, ", "), path)
	}
	return nil
}

// A newerError is a log whose tables a newer build wrote, of a schema
// version this one does not read: not damage, so it is reported as such
// and left as it is.
type newerError struct {
	version int32
}

func (e *newerError) Error() string {
	return fmt.Sprintf("written by a newer provlog (schema version %d; this build reads up to %d): open it with that build or a later one", e.version, schemaVersion)
}

// checkNotNewer fails with a *newerError if the state row's version is
// above this build's; a database without the log's tables passes.
func checkNotNewer(ctx context.Context, tx pgx.Tx) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('provlog_state') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return err
	}
	var version int32
	err := tx.QueryRow(ctx, `SELECT version FROM provlog_state`).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if version > schemaVersion {
		return &newerError{version: version}
	}
	return nil
}

// scanState reads a state row.
func scanState(row pgx.Row) (log.State, error) {
	var version int32
	var size int64
	var rng, cp []byte
	if err := row.Scan(&version, &size, &rng, &cp); err != nil {
		return log.State{}, fmt.Errorf("reading the state: %w", err)
	}
	if version > schemaVersion {
		return log.State{}, &newerError{version: version}
	}
	if version != schemaVersion {
		return log.State{}, fmt.Errorf("the log's tables have version %d, this program reads version %d", version, schemaVersion)
	}
	n := bits.OnesCount64(uint64(size))
	if size < 0 || len(rng) != n*hashSize {
		return log.State{}, fmt.Errorf("%w: state of size %d has %d bytes of compact range, want %d", ErrCorrupt, size, len(rng), n*hashSize)
	}
	if size == 0 {
		return log.State{}, nil
	}
	st := log.State{Size: uint64(size), Checkpoint: cp, Range: make([][]byte, n)}
	for i := range n {
		st.Range[i] = rng[i*hashSize : (i+1)*hashSize : (i+1)*hashSize]
	}
	return st, nil
}

// Err returns the failure that stopped the store's commits, or nil.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Unreachable returns why the store's listener could not reach the
// database at its last try, or nil since it listens again or a commit or
// read of the state went through; or, that reached, why it takes no
// writes (log.ErrReadOnly) as the listener last found. A sidecar with no
// commits under way knows the database is down, or read-only, from this
// alone.
func (s *Store) Unreachable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cmp.Or(s.unreachable, s.noWrites)
}

func (s *Store) setUnreachable(err error) {
	s.mu.Lock()
	s.unreachable = err
	if err == nil {
		s.noWrites = nil
	}
	s.mu.Unlock()
}

// fail makes every later commit fail with err.
func (s *Store) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		s.errorf("logpg: refusing further commits: %v", err)
	}
}

type view struct {
	log.State
	hot *hot.Nodes
}

// acquire registers a call that Close waits for and returns this handle's
// newest state.
func (s *Store) acquire(ctx context.Context) (view, error) {
	if err := ctx.Err(); err != nil {
		return view{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return view{}, errClosed
	}
	s.calls.Add(1)
	return view{s.state, s.hot}, nil
}

// atLeast returns a view covering size, asking the database for newer
// state first if this handle knows less: a read for what another writer
// just committed finds it.
func (s *Store) atLeast(ctx context.Context, v view, size uint64) view {
	if size <= v.Size {
		return v
	}
	if _, err := s.Latest(ctx); err != nil {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return view{s.state, s.hot}
}

// publish makes st this handle's state if it is newer, with the hot nodes
// grown by nodes (every node completed from a size at or below this
// handle's state up to st.Size; With skips those it holds), and tells the
// followers. The caller holds s.advance.
func (s *Store) publish(st log.State, nodes []log.Node) {
	s.mu.Lock()
	s.unreachable = nil // the database answered; the listener may still be waiting to reconnect
	if st.Size <= s.state.Size {
		s.mu.Unlock()
		return
	}
	s.state, s.hot = st, s.hot.With(st.Size, nodes)
	fs := s.followers
	s.mu.Unlock()
	for _, fn := range fs {
		fn(st)
	}
}

// Follow implements [log.SharedStorage.Follow].
func (s *Store) Follow(fn func(log.State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.followers = append(s.followers, fn)
}

// State implements [log.Storage.State]: the newest state this handle
// knows, its own commits included. [Store.Latest] asks the database.
func (s *Store) State(ctx context.Context) (log.State, error) {
	v, err := s.acquire(ctx)
	if err != nil {
		return log.State{}, err
	}
	s.calls.Done()
	return cloneState(v.State), nil
}

// extend checks that the leaf hashes [from.Size, to.Size) take the compact
// range of from to that of to, and returns the nodes they complete.
func extend(from, to log.State, leaves [][]byte) ([]log.Node, error) {
	if to.Size < from.Size {
		return nil, fmt.Errorf("%w: the stored size %d is below %d, a size this handle saw committed", ErrCorrupt, to.Size, from.Size)
	}
	if uint64(len(leaves)) != to.Size-from.Size {
		return nil, fmt.Errorf("%w: %d leaf hashes stored in [%d, %d)", ErrCorrupt, len(leaves), from.Size, to.Size)
	}
	rng, err := (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewRange(0, from.Size, cloneHashes(from.Range))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	var nodes []log.Node
	for _, h := range leaves {
		if len(h) != hashSize {
			return nil, fmt.Errorf("%w: a stored leaf hash is %d bytes", ErrCorrupt, len(h))
		}
		if err := rng.Append(h, func(id compact.NodeID, h []byte) { nodes = append(nodes, log.Node{ID: id, Hash: h}) }); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
	}
	got := rng.Hashes()
	if len(got) != len(to.Range) {
		return nil, fmt.Errorf("%w: the stored state of size %d does not extend the state of size %d", ErrCorrupt, to.Size, from.Size)
	}
	for i := range got {
		if !bytes.Equal(got[i], to.Range[i]) {
			return nil, fmt.Errorf("%w: the stored state of size %d does not extend the state of size %d this handle saw committed", ErrCorrupt, to.Size, from.Size)
		}
	}
	return nodes, nil
}

// Latest implements [log.SharedStorage.Latest].
func (s *Store) Latest(ctx context.Context) (log.State, error) {
	if _, err := s.acquire(ctx); err != nil {
		return log.State{}, err
	}
	defer s.calls.Done()
	return s.latest(ctx)
}

// latest reads the newest state. It holds s.advance only to publish what
// it read, not while it reads and flushes, so a commit does not wait for
// it.
func (s *Store) latest(ctx context.Context) (log.State, error) {
	s.mu.Lock()
	known := s.state
	s.mu.Unlock()
	var st log.State
	var leaves [][]byte
	err := s.rerun(ctx, "reading the latest state", func(ctx context.Context, conn *pgx.Conn) error {
		// A batch anew for each try: pgx keeps in a batch it sent the
		// statements it prepared on that connection.
		b := &pgx.Batch{}
		b.Queue(sqlReadState).QueryRow(func(row pgx.Row) error {
			var err error
			st, err = scanState(row)
			return err
		})
		b.Queue(sqlLeavesFrom, int64(known.Size)).Query(func(rows pgx.Rows) error {
			var err error
			leaves, err = scanLeaves(rows, known.Size)
			return err
		})
		// The batch is one transaction; committing it flushes what it
		// read, unless that is the state known already (flushed when
		// adopted).
		b.Queue(sqlFlushUnlessAt, int64(known.Size))
		return conn.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return log.State{}, fmt.Errorf("reading the latest state: %w", err)
	}
	// The leaves were read after the state: newer commits may show.
	if st.Size >= known.Size && uint64(len(leaves)) > st.Size-known.Size {
		leaves = leaves[:st.Size-known.Size]
	}
	nodes, err := extend(known, st, leaves)
	if err != nil {
		s.fail(err)
		return log.State{}, err
	}
	s.advance.Lock()
	// A commit may have published a newer state since known was taken:
	// publish keeps the newer one.
	s.publish(st, nodes)
	s.advance.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneState(s.state), nil
}

// scanLeaves reads (idx, hash) rows that must run from idx from on
// without gaps.
func scanLeaves(rows pgx.Rows, from uint64) ([][]byte, error) {
	var out [][]byte
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			return nil, err
		}
		if uint64(idx) != from+uint64(len(out)) {
			return nil, fmt.Errorf("%w: leaf hash %d is missing", ErrCorrupt, from+uint64(len(out)))
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func cloneState(st log.State) log.State {
	if st.Size == 0 {
		return log.State{}
	}
	return log.State{Size: st.Size, Range: cloneHashes(st.Range), Checkpoint: bytes.Clone(st.Checkpoint)}
}

func cloneHashes(hs [][]byte) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = bytes.Clone(h)
	}
	return out
}

// Close implements [log.Storage.Close]. It waits for calls in progress.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.calls.Wait()
	s.follow.Wait()
	s.pool.Close()
	return nil
}
