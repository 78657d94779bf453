package logpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/transparency-dev/merkle/compact"
)

// readLog is what the reads of these tests find: a log of five entries,
// the first two under fence keys, and a blob.
type readLog struct {
	entries [][]byte
	state   log.State
	blob    string
}

// fillForReads commits readLog's entries and blob through s.
func fillForReads(t *testing.T, s *Store) readLog {
	t.Helper()
	fences := []log.Fence{{Key: "a"}, {Key: "b"}, {}, {}, {}}
	var b *log.Batch
	err := s.CommitShared(t.Context(), fences, func(st log.State, _ []bool) (*log.Batch, error) {
		b = buildOn(t, st, "read", len(fences))
		return b, nil
	})
	if err != nil {
		t.Fatalf("CommitShared: %v", err)
	}
	sum, err := s.Blobs().Put([]byte("a retained result"))
	if err != nil {
		t.Fatalf("putting a blob: %v", err)
	}
	return readLog{entries: b.Entries, state: b.State, blob: sum}
}

// readKinds are the reads a store answers from the database (a store
// that keeps no tree nodes in memory, for ReadNodes), each checking what
// it read against rl.
var readKinds = []struct {
	name string
	read func(ctx context.Context, s *Store, rl readLog) error
}{
	{"Latest", func(ctx context.Context, s *Store, rl readLog) error {
		st, err := s.Latest(ctx)
		if err == nil && !bytes.Equal(st.Checkpoint, rl.state.Checkpoint) {
			err = fmt.Errorf("read checkpoint %q, want %q", st.Checkpoint, rl.state.Checkpoint)
		}
		return err
	}},
	{"Entries", func(ctx context.Context, s *Store, rl readLog) error {
		es, err := s.Entries(ctx, 1, 5)
		if err == nil && fmt.Sprintf("%q", es) != fmt.Sprintf("%q", rl.entries[1:]) {
			err = fmt.Errorf("read %q, want %q", es, rl.entries[1:])
		}
		return err
	}},
	{"ReadNodes", func(ctx context.Context, s *Store, rl readLog) error {
		hs, err := s.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(0, 3), compact.NewNodeID(2, 0)})
		if err == nil && !bytes.Equal(hs[0], log.LeafHash(rl.entries[3])) {
			err = fmt.Errorf("read leaf hash %x, want %x", hs[0], log.LeafHash(rl.entries[3]))
		}
		return err
	}},
	{"LeafIndex", func(ctx context.Context, s *Store, rl readLog) error {
		idx, err := s.LeafIndex(ctx, log.LeafHash(rl.entries[3]))
		if err == nil && idx != 3 {
			err = fmt.Errorf("read index %d, want 3", idx)
		}
		return err
	}},
	{"Checkpoint", func(ctx context.Context, s *Store, rl readLog) error {
		cp, err := s.Checkpoint(ctx, rl.state.Size)
		if err == nil && !bytes.Equal(cp, rl.state.Checkpoint) {
			err = fmt.Errorf("read %q, want %q", cp, rl.state.Checkpoint)
		}
		return err
	}},
	{"Checkpoints", func(ctx context.Context, s *Store, rl readLog) error {
		var sizes []uint64
		err := s.Checkpoints(ctx, 0, func(size uint64, _ []byte) error { sizes = append(sizes, size); return nil })
		if err == nil && fmt.Sprint(sizes) != fmt.Sprint([]uint64{rl.state.Size}) {
			err = fmt.Errorf("read sizes %v, want [%d]", sizes, rl.state.Size)
		}
		return err
	}},
	{"FenceKeys", func(ctx context.Context, s *Store, rl readLog) error {
		var keys []string
		size, err := s.FenceKeys(ctx, func(key string, last uint64) error { keys = append(keys, fmt.Sprintf("%s=%d", key, last)); return nil })
		if err == nil && (size != rl.state.Size || strings.Join(keys, ",") != "a=0,b=1") {
			err = fmt.Errorf("read keys %q at size %d, want a=0,b=1 at %d", keys, size, rl.state.Size)
		}
		return err
	}},
	{"ReadBlob", func(ctx context.Context, s *Store, rl readLog) error {
		_, err := s.Blobs().Get(rl.blob)
		return err
	}},
	{"HasBlob", func(ctx context.Context, s *Store, rl readLog) error {
		ok, err := s.Blobs().Has(rl.blob)
		if err == nil && !ok {
			err = errors.New("the blob put is not there")
		}
		return err
	}},
	// A blob's write and delete change the log's blobs, but each is the
	// same whether it ran once or twice (a blob is named by its content,
	// and its insert keeps a row already there), so they are tried again
	// as reads are.
	{"PutBlob", func(ctx context.Context, s *Store, rl readLog) error {
		_, err := s.Blobs().Put([]byte("another retained result"))
		return err
	}},
	{"DeleteBlob", func(ctx context.Context, s *Store, rl readLog) error {
		return pgBlobs{s}.DeleteBlob(strings.Repeat("0", 64))
	}},
}

// openForReads opens a store for readKinds (see openLogged) that keeps no
// tree nodes in memory, and commits readLog through it.
func openForReads(t *testing.T, dsn string) (*Store, func() []string, readLog) {
	t.Helper()
	s, lines := openLoggedWith(t, dsn, Options{MaxHotNodes: -1})
	return s, lines, fillForReads(t, s)
}

// TestDeadPooledConnectionsRead: every idle connection of the pool has
// its backend terminated, then each kind of read meets them one by one,
// finds each dead by its reply, takes another, and reads on the fresh
// connection the pool opens, with no error.
func TestDeadPooledConnectionsRead(t *testing.T) {
	for _, k := range readKinds {
		t.Run(k.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			s, lines, rl := openForReads(t, dsn)
			pids := fillPool(t, s.pool)
			terminate(t, dsn, pids)
			if err := k.read(t.Context(), s, rl); err != nil {
				t.Fatalf("%s after the pool's backends were terminated: %v", k.name, err)
			}
			if r := retries(lines()); len(r) != len(pids) {
				t.Fatalf("%s tried another connection %d times, want %d (one per dead connection): %q", k.name, len(r), len(pids), r)
			}
		})
	}
}

// TestRestartBetweenReads: the server restarts (pg_ctl stop -m immediate,
// start) while the pool holds as many idle connections as it may; then
// each kind of read takes them one by one and reads on a fresh one, with
// no error.
func TestRestartBetweenReads(t *testing.T) {
	c := pgtest.NewCluster(t)
	s, lines, rl := openForReads(t, c.DSN)
	for _, k := range readKinds {
		t.Run(k.name, func(t *testing.T) {
			pids := fillPool(t, s.pool)
			before := len(retries(lines()))
			c.Stop("immediate")
			c.Start()
			if err := k.read(t.Context(), s, rl); err != nil {
				t.Fatalf("%s after the restart: %v", k.name, err)
			}
			if n := len(retries(lines())) - before; n != len(pids) {
				t.Fatalf("%s tried another connection %d times, want %d (one per dead connection)", k.name, n, len(pids))
			}
		})
	}
}

// TestReadWhileDown: the server stops (and stays stopped) while the pool
// holds as many idle connections as it may. The first read meets each
// dead connection once, then cannot connect, and says the store is
// unavailable; every read after it cannot connect and says so at once.
// Once the server is back, each reads again.
func TestReadWhileDown(t *testing.T) {
	c := pgtest.NewCluster(t)
	s, lines, rl := openForReads(t, c.DSN)
	pids := fillPool(t, s.pool)
	c.Stop("immediate")
	for i, k := range readKinds {
		err := k.read(t.Context(), s, rl)
		if !errors.Is(err, log.ErrUnavailable) {
			t.Fatalf("%s while the server is down: %v, want log.ErrUnavailable", k.name, err)
		}
		if i == 0 {
			t.Logf("%s while the server is down: %v", k.name, err)
		}
		want := len(pids) // the first read's tries, each on a dead connection; then none
		if n := len(retries(lines())); n != want {
			t.Fatalf("after %s (read %d) while the server is down, reads tried another connection %d times, want %d: %q", k.name, i+1, n, want, retries(lines()))
		}
	}
	c.Start()
	for _, k := range readKinds {
		if err := k.read(t.Context(), s, rl); err != nil {
			t.Fatalf("%s once the server is back: %v", k.name, err)
		}
	}
}

// TestReadErrorNotRetried: an error the server answers with, its session
// going on (here a table is missing), is not a dead connection: the read
// fails at once, on the first connection, and not as unavailable.
func TestReadErrorNotRetried(t *testing.T) {
	dsn := pgtest.DSN(t)
	s, lines, rl := openForReads(t, dsn)
	pgtest.Psql(t, dsn, "ALTER TABLE provlog_entries RENAME TO provlog_entries_gone")
	_, err := s.Entries(t.Context(), 0, rl.state.Size)
	if err == nil || errors.Is(err, log.ErrUnavailable) || !strings.Contains(err.Error(), "42P01") {
		t.Fatalf("Entries with its table missing: %v, want the server's error (42P01), not unavailable", err)
	}
	if r := retries(lines()); len(r) != 0 {
		t.Fatalf("a read the server refused tried another connection: %q", r)
	}
}

// TestFenceKeysDiesAfterHandingOut: the connection of a FenceKeys dies
// after it handed keys to its caller. It fails, and is not run again on
// another connection, which would hand them again.
func TestFenceKeysDiesAfterHandingOut(t *testing.T) {
	dsn := pgtest.DSN(t)
	s, lines, _ := openForReads(t, dsn)
	pids := fillPool(t, s.pool)
	var keys []string
	_, err := s.FenceKeys(t.Context(), func(key string, _ uint64) error {
		if len(keys) == 0 {
			terminate(t, dsn, pids) // the read's own backend among them
		}
		keys = append(keys, key)
		return nil
	})
	if err == nil {
		t.Fatal("FenceKeys whose backend was terminated as it handed out keys succeeded")
	}
	if strings.Join(keys, ",") != "a,b" {
		t.Fatalf("FenceKeys handed out %q, want a,b once", keys)
	}
	if r := retries(lines()); len(r) != 0 {
		t.Fatalf("a FenceKeys that had handed out keys tried another connection: %q", r)
	}
}

// TestFrozenDatabaseBoundsReads: a database that stops answering with the
// store's connections open (every process of the cluster SIGSTOPped) makes
// each kind of read fail as unavailable once ResolveTimeout has passed,
// as a commit does, instead of waiting for as long as it lasts: an OPP
// claim's check and the log API's reads wait on them. Before, a read
// waited until its caller gave up (the blob reads, for their own 30s).
func TestFrozenDatabaseBoundsReads(t *testing.T) {
	c := pgtest.NewCluster(t)
	s, _ := openLoggedWith(t, c.DSN, Options{MaxHotNodes: -1, ResolveTimeout: 2 * time.Second})
	rl := fillForReads(t, s)
	c.Freeze()
	for _, k := range readKinds {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := k.read(ctx, s, rl)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut || !errors.Is(err, log.ErrUnavailable) {
			t.Errorf("%s on a frozen database (ResolveTimeout 2s): %v after its caller's 20s ran out (%v), want log.ErrUnavailable within the store's bound", k.name, err, timedOut)
		}
	}
}
