// Package logpebble keeps a [log.Storage] in a Pebble v2 database on local
// disk. The key layout is documented in keys.go.
//
// # Durability
//
// [Store.Commit] writes a whole batch (entries, leaf hashes and their index,
// nodes, checkpoint, state) as one Pebble batch committed with pebble.Sync,
// so it returns only after the write-ahead log is synced. Concurrent syncs
// share one fsync (Pebble's group commit), but the intended writer is one
// sequencer that batches appends itself.
//
// # Locking
//
// Pebble locks the directory: one process at a time. [Open] on a directory
// another process (or another Store in this process) holds fails with an
// error wrapping [ErrLocked]; commands that get it should point the user to
// the running log's HTTP API (--log URL).
//
// # Corruption
//
// Open checks the stored state against the data cheaply (the last entry,
// leaf and checkpoint exist, nothing lies past them, the compact range
// matches the stored nodes) and fails with an error wrapping [ErrCorrupt]
// rather than repair anything. Once Pebble reports corruption, or a commit
// fails with its outcome unknown, the Store refuses further commits: it fails
// closed until it is reopened and checked again. Reads go on, and a read that
// meets corruption fails with an error wrapping ErrCorrupt. [Store.Verify]
// reads every block (provlog audit --data, serve --verify-on-open), and
// reports a torn last MANIFEST record, which Pebble drops without a word.
// A store opened with Options.ScrubInterval reads itself a slice at a time
// in the background, round and round (scrub.go, [Store.ScrubStatus]), so
// that a corrupt block nothing reads is found within a pass, not by the
// next proof or write that meets it.
//
// # Faults
//
// A storage fault stops writing, never the process: the first failed
// write, sync, create, rename or remove, and every Pebble background error,
// becomes the Store's sticky error ([Store.Err], implementing
// [log.Health]), wrapping [log.ErrDiskFull], [log.ErrReadOnly] or
// [log.ErrIO]. Pebble v2.1.7 panics on a WAL write error and dies
// unrecoverably ("unlock of unlocked mutex") when it cannot create its
// next WAL, and retries a failed flush in a tight loop, so the Store's
// file system (log/pebbleguard) keeps WAL errors from Pebble once recorded,
// freezes the disk and backs off creation; Commit checks the sticky error
// after Pebble returns, so nothing is acknowledged that may not be durable.
// A store that cannot be written at open (read-only file system, full
// disk) opens read-only and says why in Err.
//
// A failed store stays failed until it is reopened: by a restart, or in
// place by [Store.Reopen] (reopen.go), which lets the failed Pebble
// instance go (its file system retired: it never touches the disk again)
// and opens a new one through Open's path and checks. Reopen mends only
// what can pass (a full disk once space is freed, a read-only or failing
// file system), never corruption or lost entries; the sequencer retries
// it on its own for a full disk only (server.SequencerOptions.RetryDiskFull).
//
// # Forks
//
// A transparency log must never sign two views of its history. Pebble
// replays its write-ahead log up to the first damaged record and treats
// the rest as a torn tail, without error: a flipped byte, a truncated
// file or a disk that lied about a sync would reopen the log shorter than
// it acknowledged, and the next commit would sign a second root at a size
// already handed out. So the Store trusts, on open, only a tree that is
// consistent with and at least as large as its published-batch record
// (published.go): the last two batches it acknowledged, written outside
// Pebble after each commit's sync and before its acknowledgement, and
// synced in the background every 50 ms (no fsync added to a commit; the
// cost is writing each batch twice). If Pebble lost only those
// batches, Open restores them from the record (read-only: in memory) and
// logs it; if it lost more, or holds another tree at their size, Open fails
// with a *[log.LostError] naming both sizes and roots and what to do (keep
// the data dir as evidence, start a new log with a new origin). provlog
// serve and audit also check the tree against the anchor records and the
// witnesses' cosigned checkpoint (server.CheckHandedOut).
//
// What each fault ends in (tests: faults_test.go, fork_test.go here;
// cmd/provlog storage_faults_test.go on real processes):
//
//	fault                                         outcome
//	write/sync/create of WAL, sstable, MANIFEST,  no panic; appends refused with an
//	marker, dir sync, remove, rename; before or   I/O error; reopened: every acked
//	after it persisted (TestInjectedFaults, 128)  entry and checkpoint, audit clean
//	flipped byte / cut in the WAL's last batch    restored from the record; all held
//	flipped byte / cut 3 batches back in the WAL  refused: LostError 18 vs 21
//	flipped byte in the middle of the WAL         refused: LostError (Pebble kept 7 of 21)
//	flipped byte in an sstable                    Verify fails (ErrCorrupt, the file);
//	                                              store stops; reads of it fail naming it
//	torn or flipped last MANIFEST record          opens with a warning Verify reports;
//	                                              or, if the lost record was a
//	                                              compaction's, refused as corrupt
//	                                              (the files it names are gone)
//	flipped byte in a block startup does not read  the background scrub fails the
//	(the oldest checkpoints), scrub on            store (ErrCorrupt, the file); /healthz
//	                                              503 "corrupt", scrub.last_error
//	flipped byte in the published record          slot ignored; the older slot guards
//	flipped bytes in both published slots         refused as corrupt, naming both files
//	(TestPublishedBothTorn)                       and what moving them aside gives up
//	a published slot fails its fsync              no commits: Err names the file, I/O
//	(TestPublishedSyncFailure; log/slots)         error; a background sync's too
//	disk full mid-run (24 MiB tmpfs)              appends refused "disk full"; /healthz
//	                                              503 storage "disk full"; reads go on;
//	                                              restart comes up read-only; audit OK;
//	                                              space freed: all acked entries held
//	open on a full disk with a WAL to flush       Pebble's Open would retry the flush for
//	(TestOpenFullDiskReplay)                      ever: abandoned after 2 s, opened
//	                                              read-only, "disk full"; Reopen later
//	disk full, then space freed, same process     the sequencer's retry reopens the store
//	(TestFullDiskResumesInPlace, real tmpfs;      in place: every acked entry held, appends
//	TestResumeAfterDiskFull)                      go on; still full: not reopened
//	each injected fault above, then Resume        the same as after a restart, and appends
//	                                              go on (TestInjectedFaults)
//	read-only bind mount over the dir mid-run     appends refused "read-only" at the
//	                                              next WAL; restart read-only; audit OK
//
// # Memory and speed
//
// Pebble's memory is bounded by its cache size: Pebble reserves its
// memtables (up to two) out of the block cache, which holds blocks only in
// what they leave, so Open refuses a cache smaller than three memtables.
// Besides, a Store keeps the upper levels of the tree in memory, at most
// 2^17 hashes (4 MiB): every proof needs one node per level, and with the
// upper levels in memory and the lower ones stored next to each other (see
// keys.go) an inclusion proof costs Pebble one seek and a few steps.
// [DefaultCacheSize] and [DefaultMemTableSize] keep a process writing and
// serving a log of a million 1 KiB entries under 150 MiB of RSS; see there.
package logpebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/provlog/provlog/log/pebbleguard"
	"github.com/transparency-dev/merkle/compact"
)

// formatMajorVersion pins Pebble's on-disk format. Pebble opens a new
// database at its oldest supported format unless told otherwise, and a
// format only ever ratchets forward, so the version is named here, not left
// to FormatNewest (which moves with every Pebble upgrade). FormatValueSeparation
// is the newest format of Pebble v2.1.7; it includes WAL sync chunks
// (FormatWALSyncChunks: a torn WAL tail is told apart from corruption on
// replay) and checksummed sstable footers (FormatTableFormatV6). Value
// separation itself stays off (Pebble's default policy). Raise this only
// deliberately, with a note on what the new format brings: stores written by
// a newer format cannot be opened by an older provlog.
const formatMajorVersion = pebble.FormatValueSeparation

// Defaults for [Options].
//
// They were measured on a log of a million 1 KiB entries (2 cores, glibc
// malloc): serving proofs, the process stayed under 110 MiB of RSS, and
// under 125 MiB while also appending 16-entry batches as fast as it could.
// Pebble allocates its cache and memtables with C malloc, whose
// fragmentation added about as much again as Pebble accounts for: with a 64
// MiB cache the process passed 150 MiB. A Store therefore trims the C heap
// twice a second (trim.go). The cache is 24 MiB, not 32: in a task sidecar
// that replays a log of a million tasks (taskbench, reopen) the smaller
// cache took 16 MiB off the peak RSS (160 to 144 MiB), and a proof cost 9%
// more CPU (58 µs instead of 53, harness included: 200,000 random proofs
// on a million entries, load average 24).
const (
	DefaultCacheSize    = 24 << 20
	DefaultMemTableSize = 8 << 20
)

var (
	// ErrLocked is returned (wrapped) by [Open] when another process, or
	// another open Store, holds the directory.
	ErrLocked = errors.New("log store is in use by another process")

	// ErrCorrupt is returned (wrapped) when the stored data contradicts
	// itself or Pebble reports corruption. Nothing is repaired.
	ErrCorrupt = fmt.Errorf("log store is %w", log.ErrCorrupt)

	errClosed = errors.New("log store is closed")
)

// Options tune a [Store]. A nil *Options, and zero fields, mean the defaults.
type Options struct {
	// CacheSize is the size in bytes of Pebble's block cache, which holds
	// the tree nodes that proofs read. Pebble reserves its memtables out of
	// it, so it bounds Pebble's memory; it must be at least three times
	// MemTableSize. Default [DefaultCacheSize].
	CacheSize int64

	// MemTableSize is the size in bytes of one Pebble memtable. Larger
	// memtables mean fewer flushes under append load; Pebble keeps up to two
	// in memory, reserved from the cache. Default [DefaultMemTableSize].
	MemTableSize uint64

	// Logf receives Pebble's log lines and the store's routine events
	// (write stalls, a reopen). If nil, they are discarded: Pebble never
	// writes to stdout or stderr on its own.
	Logf func(format string, args ...any)

	// Errorf receives what an operator must see: the store's faults (it
	// stopped taking commits, corruption, Pebble's background errors, a
	// file it cannot write) and warnings of damage that lost nothing (a
	// batch restored from the published record, a torn MANIFEST record;
	// [Store.Verify] reports those too). If nil, they go to Logf.
	Errorf func(format string, args ...any)

	// ReadOnly opens the store for reading only: nothing is written, not
	// even Pebble's own files, and commits are refused. Audits open stores
	// this way, so that they work on a full or read-only disk.
	ReadOnly bool

	// ScrubInterval, if positive, starts a background scrub (scrub.go):
	// every interval the store reads the next ScrubBytes of itself, so
	// that corruption where nothing reads is found; see
	// [Store.ScrubStatus].
	ScrubInterval time.Duration
	// ScrubBytes is what one scrub slice reads (default
	// [DefaultScrubBytes]).
	ScrubBytes uint64

	testingOnlyMaxHotNodes *uint64 // instead of maxHotNodes
	testingOnlyFS          vfs.FS  // instead of vfs.Default, under the pebbleguard.FS
	testingOnlyChunkBits   uint    // instead of chunkBits, if not 0
}

// A Store is a [log.Storage] in a Pebble database. It is safe for
// concurrent use.
type Store struct {
	db   *pebble.DB
	lock *pebble.Lock
	fs   *pebbleguard.FS
	r    reader     // what reads read: db, or an overlay of it (open.go)
	pub  *publisher // nil if the store cannot commit
	// warnings found on opening that lose no data (verify.go)
	warnings []string
	dir      string
	opts     Options // as Open completed them
	logf     func(format string, args ...any)
	errorf   func(format string, args ...any) // faults and warnings (Options.Errorf)
	scrub    *scrubber                        // nil if the store does not scrub
	trim     *trimmer                         // nil if there is no C heap to trim

	commitMu sync.Mutex // serializes commits

	mu      sync.Mutex
	closed  bool
	state   log.State     // the last committed state; its slices are never changed
	hot     *hot.Nodes    // the upper levels of the tree at state.Size
	chunks  chunkIndex    // the leaf-hash index's layout (chunks.go)
	failure error         // why commits are refused, once they are
	failed  chan struct{} // closed when failure is set
	// reopening is closed when a Reopen under way is done (nil: none).
	reopening chan struct{}
	calls     sync.WaitGroup
}

var _ log.Storage = (*Store)(nil)

// A view is what a call may read: the last committed state bounds it, since
// keys of a commit in progress may be visible in Pebble before Commit
// returns.
type view struct {
	log.State
	hot    *hot.Nodes
	chunks chunkIndex
}

// acquire registers a call that Close (and Reopen) must wait for and
// returns its view. While Reopen replaces Pebble it waits, for up to
// reopenWait (reopen.go).
func (s *Store) acquire(ctx context.Context) (view, error) {
	for {
		if err := ctx.Err(); err != nil {
			return view{}, err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return view{}, errClosed
		}
		if ch := s.reopening; ch != nil {
			s.mu.Unlock()
			if err := waitReopen(ctx, ch); err != nil {
				return view{}, err
			}
			continue
		}
		s.calls.Add(1)
		v := view{s.state, s.hot, s.chunks}
		s.mu.Unlock()
		return v, nil
	}
}

// Commit implements [log.Storage.Commit]. A batch it refuses writes
// nothing. If Pebble fails to commit, or the file system fails while it
// commits, the outcome is unknown (the batch may be found after
// reopening) and the Store refuses further commits; see [Store.Err].
// Commit does not panic: a panic inside Pebble is recovered and fails the
// store.
func (s *Store) Commit(ctx context.Context, b *log.Batch) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	st, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.calls.Done()
	s.mu.Lock()
	failure := s.failure
	s.mu.Unlock()
	if failure != nil {
		return fmt.Errorf("refusing to commit to a failed log store: %w", failure)
	}
	if err := b.Check(st.Size); err != nil {
		return fmt.Errorf("refusing batch: %w", err)
	}

	pb := s.db.NewBatchWithSize(batchSize(b, st.chunks))
	if err := fillBatch(pb, s.r, b, st.chunks); err != nil {
		pb.Close()
		if errors.Is(err, ErrCorrupt) {
			return s.corrupt(err) // a leaf hash of the chunk it completes is gone
		}
		return s.readError(err)
	}
	err = s.commitPebble(pb)
	if err == nil {
		if err := s.Err(); err != nil {
			// The file system failed during the commit, and pebbleguard kept
			// the error from Pebble (whose frozen WAL then takes writes
			// without keeping them): the batch may or may not be on disk.
			// It is not published, so a restart brings it back only if
			// Pebble did keep it; the record would have restored a batch
			// whose callers were told it failed.
			return fmt.Errorf("committing batch [%d, %d): outcome unknown: %w", b.Start, b.State.Size, err)
		}
	}
	if err == nil && s.pub != nil {
		// After Pebble's sync, before the batch is acknowledged
		// (published.go).
		if err := s.pub.write(b); err != nil {
			s.fail(err)
			return fmt.Errorf("committing batch [%d, %d): outcome unknown: writing the published record: %w", b.Start, b.State.Size, err)
		}
	}
	if err != nil {
		err = fmt.Errorf("committing batch [%d, %d): %w", b.Start, b.State.Size, err)
		if pebble.IsCorruptionError(err) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		} else if log.FaultReason(err) == "" {
			err = log.FileFault("committing to", s.dir, err)
		}
		s.fail(err)
		return err
	}

	next := log.State{Size: b.State.Size, Range: cloneHashes(b.State.Range), Checkpoint: bytes.Clone(b.State.Checkpoint)}
	if next.Checkpoint == nil {
		next.Checkpoint = []byte{}
	}
	hot := st.hot.With(next.Size, b.Nodes)
	s.mu.Lock()
	s.state, s.hot = next, hot
	s.mu.Unlock()
	return nil
}

// batchSize estimates the bytes of b's Pebble batch: with the 'j' keys of
// the chunks it completes, so that such a batch is not grown (and copied)
// several times on its way to some 200 KB.
func batchSize(b *log.Batch, ci chunkIndex) int {
	n := 0
	for _, e := range b.Entries {
		n += len(e) + 60 // entry, key, leaf hash and batch overhead
	}
	n += int(ci.completed(b.Start, len(b.Entries))) * (leafKeySize + 4)
	return n + 50*len(b.Nodes) + len(b.State.Checkpoint) + 40*len(b.State.Range) + 100
}

// fillBatch sets every key of b in pb (keys.go), reading from r the leaf
// hashes of the chunks of the leaf-hash index it completes (chunks.go).
func fillBatch(pb *pebble.Batch, r reader, b *log.Batch, ci chunkIndex) error {
	key := make([]byte, 0, leafKeySize)
	set := func(k, v []byte) error {
		if err := pb.Set(k, v, nil); err != nil {
			return fmt.Errorf("building batch: %w", err)
		}
		return nil
	}
	for i, e := range b.Entries {
		idx := b.Start + uint64(i)
		if err := set(appendEntryKey(key[:0], idx), e); err != nil {
			return err
		}
		if err := set(appendNodeKey(key[:0], compact.NewNodeID(0, idx)), b.LeafHashes[i]); err != nil {
			return err
		}
	}
	if err := ci.writeChunks(pb, r, b); err != nil {
		return err
	}
	for _, nd := range b.Nodes {
		if nd.ID.Level == 0 {
			continue // written from b.LeafHashes, which Batch.Check found equal
		}
		if err := set(appendNodeKey(key[:0], nd.ID), nd.Hash); err != nil {
			return err
		}
	}
	if err := set(checkpointKey(b.State.Size), b.State.Checkpoint); err != nil {
		return err
	}
	return set(stateKey, encodeState(b.State.Size, ci, b.State.Range))
}

// commitPebble commits pb durably and closes it. It gives up, with the
// store's failure, if the store fails while Pebble holds the commit
// ([pebbleguard.FS.Commit]); Pebble then keeps the batch, so it is closed
// only when its commit returns, and the instance is abandoned, not closed
// (closePebble). A panic inside Pebble wedges the instance: it may have
// left Pebble's locks held, so it is neither closed nor reopened.
func (s *Store) commitPebble(pb *pebble.Batch) error {
	err := s.fs.Commit(s.failed, func() error {
		defer pb.Close()
		return pb.Commit(pebble.Sync)
	})
	if errors.Is(err, pebbleguard.ErrHeld) {
		return fmt.Errorf("the store failed while Pebble held the commit: %w", s.Err())
	}
	return err
}

// Close implements [log.Storage.Close]. It waits for calls in progress to
// return, then closes Pebble and releases the directory.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.stopScrub()
	s.stopTrim()
	s.calls.Wait()
	if err := s.closePebble(); err != nil {
		return fmt.Errorf("closing log store %s: %w", s.dir, err)
	}
	return nil
}
