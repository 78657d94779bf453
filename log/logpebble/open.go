package logpebble

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/provlog/provlog/log/pebbleguard"
	"github.com/transparency-dev/merkle/compact"
)

// Open opens the log store in dir, creating dir and an empty store if
// needed, and checks the stored state. It fails with an error wrapping
// [ErrLocked] if the directory is in use, [ErrCorrupt] if the data
// contradicts itself, and [log.ErrLost] (a *[log.LostError]) if the store
// holds less than its published-checkpoint record says was acknowledged.
//
// A store that cannot be written (a read-only file system, a full disk,
// an I/O error while Pebble starts) is opened read-only instead: reads
// are served, and [Store.Err] says why commits are refused. So is one
// opened with Options.ReadOnly.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if uint64(o.CacheSize) < 3*o.MemTableSize {
		return nil, fmt.Errorf("opening log store %s: cache size %d is less than three times the memtable size %d: Pebble reserves its memtables from the cache, and would cache no blocks", dir, o.CacheSize, o.MemTableSize)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Errorf == nil {
		o.Errorf = o.Logf
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening log store: %w", log.FileFault("making", dir, err))
	}
	s := &Store{dir: dir, logf: o.Logf, errorf: o.Errorf, opts: o}
	if err := s.open(); err != nil {
		return nil, err
	}
	s.startScrub(&o)
	s.startTrim()
	return s, nil
}

// open opens Pebble in s.dir on a new pebbleguard.FS and loads the store from it
// with every check; Open and Reopen share it. A store that cannot be
// written opens read-only, its failure saying why.
func (s *Store) open() error {
	o := &s.opts
	s.mu.Lock()
	s.failure, s.failed = nil, make(chan struct{})
	s.mu.Unlock()
	s.hot = hot.Empty(maxHotNodes)
	if o.testingOnlyMaxHotNodes != nil {
		s.hot = hot.Empty(*o.testingOnlyMaxHotNodes)
	}
	s.state, s.warnings, s.pub = log.State{}, nil, nil
	s.chunks = chunkIndex{bits: chunkBits}
	if o.testingOnlyChunkBits != 0 {
		s.chunks.bits = o.testingOnlyChunkBits
	}
	inner := vfs.Default
	if o.testingOnlyFS != nil {
		inner = o.testingOnlyFS
	}
	s.fs = pebbleguard.NewFS(inner, s.fail, func() bool { return s.Err() != nil })
	if o.ReadOnly {
		s.fail(fmt.Errorf("%w: log store %s was opened read-only", log.ErrReadOnly, s.dir))
	}

	// Pebble drops a torn last MANIFEST record silently, and a writable
	// open then starts a new MANIFEST: look before it does.
	if w, err := checkManifest(s.dir); err == nil && w != "" {
		s.warn(w)
	}
	readOnly := o.ReadOnly
	db, err := s.openPebble(o, readOnly)
	if err != nil && !readOnly && s.Err() != nil {
		// Pebble could not start writing (the file system is read-only,
		// the disk is full): serve what is durable, read-only.
		s.errorf("logpebble: %s cannot be written (%v); opening it read-only", s.dir, s.Err())
		readOnly = true
		if s.fs.Retired() {
			s.fs = pebbleguard.NewFS(s.fs.Unwrap(), s.fail, func() bool { return s.Err() != nil })
		}
		db, err = s.openPebble(o, readOnly)
	}
	if err != nil {
		return err
	}
	s.db, s.r = db, db
	if err := s.load(readOnly); err != nil {
		s.closePebble()
		return fmt.Errorf("opening log store %s: %w", s.dir, err)
	}
	if err := s.Err(); err != nil {
		s.errorf("logpebble: %s is open for reading only: %v", s.dir, err)
	}
	return nil
}

// openPebble takes the directory's lock and opens Pebble on s.fs.
func (s *Store) openPebble(o *Options, readOnly bool) (db *pebble.DB, err error) {
	// Take Pebble's lock ourselves, so that a held lock is told apart from
	// every other reason Open can fail. Failing to create the lock file is a
	// *fs.PathError; anything else is the lock itself (EAGAIN from fcntl, or
	// Pebble's "lock held by current process").
	lock, err := pebble.LockDirectory(s.dir, s.fs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("opening log store %s: %w", s.dir, log.FileFault("locking", s.dir, err))
		}
		return nil, fmt.Errorf("opening log store %s: %w (%v)", s.dir, ErrLocked, err)
	}
	if s.fs.ReadOnlyLock() && !readOnly {
		readOnly = true
		s.fail(fmt.Errorf("%w: log store %s is on a read-only file system; it serves reads only", log.ErrReadOnly, s.dir))
	}
	po := &pebble.Options{
		FS:                 s.fs,
		FormatMajorVersion: formatMajorVersion,
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		Lock:               lock,
		Logger:             pebbleguard.Logger{Logf: o.Logf, Fail: s.fs.Record},
		EventListener:      s.eventListener(s.fs),
		ReadOnly:           readOnly,
	}
	po.Experimental.CompactionScheduler = s.fs.CompactionScheduler()
	po.Experimental.SpanPolicyFunc = func(start []byte) (pebble.SpanPolicy, []byte, error) {
		return pebble.SpanPolicy{}, spanEnd(start), nil
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	db, err = s.openOrAbandon(po)
	if err != nil {
		if pebble.IsCorruptionError(err) || errors.Is(err, fs.ErrNotExist) {
			// A file the MANIFEST names is gone (as when the MANIFEST
			// lost the record of a compaction): the store contradicts
			// itself.
			return nil, fmt.Errorf("opening log store %s: %w: %w", s.dir, ErrCorrupt, err)
		}
		if f := s.Err(); f != nil && log.FaultReason(err) == "" {
			err = fmt.Errorf("%w (%w)", err, f)
		}
		return nil, fmt.Errorf("opening log store %s: %w", s.dir, err)
	}
	s.lock = lock
	return db, nil
}

// openOrAbandon runs pebble.Open on s.fs, turning a panic into an error,
// and gives up on it if the store fails while it opens and it does not
// return in time ([pebbleguard.FS.OpenDB]): Pebble v2.1.7's Open waits for the flush of
// the memtables it replayed from the WAL, and on a full disk that flush
// fails and is retried for ever. The abandoned instance's file system is
// retired, and Pebble's reference to the lock is dropped with it; the
// caller drops ours, so that the store can open read-only.
func (s *Store) openOrAbandon(po *pebble.Options) (*pebble.DB, error) {
	db, err := s.fs.OpenDB(s.dir, po, s.failed)
	if errors.Is(err, pebbleguard.ErrHeld) {
		s.errorf("logpebble: not waiting for Pebble to finish opening %s: the store failed (%v) while it opened", s.dir, s.Err())
		return nil, fmt.Errorf("Pebble could not finish opening after the store failed: %w", s.Err())
	}
	return db, err
}

// load reads the stored state into s, checks it against the data and
// against the published record, and restores from the record the batches
// Pebble lost.
func (s *Store) load(readOnly bool) error {
	if err := s.loadState(); err != nil {
		return err
	}
	return s.reconcile(readOnly)
}

// loadState reads the stored state into s and checks it against the data.
func (s *Store) loadState() error {
	v, closer, err := s.r.Get(stateKey)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := s.r.NewIter(nil)
		if err != nil {
			return s.readError(fmt.Errorf("reading keys: %w", err))
		}
		defer it.Close()
		if it.First() {
			return fmt.Errorf("%w: no state, but key %q is present", ErrCorrupt, it.Key())
		}
		return s.readError(it.Error())
	}
	if err != nil {
		return s.readError(fmt.Errorf("reading state: %w", err))
	}
	size, ci, rng, err := decodeState(v)
	closer.Close()
	var newer *newerError
	if errors.As(err, &newer) {
		return err // before anything is checked, restored or migrated
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if size == 0 {
		return fmt.Errorf("%w: state has size 0", ErrCorrupt)
	}

	// The last entry and leaf are present, and nothing lies beyond them.
	if err := s.mustHave(size, entryKey(size-1), "entry %d", size-1); err != nil {
		return err
	}
	if err := s.mustHave(size, nodeKey(compact.NewNodeID(0, size-1)), "leaf hash %d", size-1); err != nil {
		return err
	}
	if err := s.mustBeEmpty(entryKey(size), kindEntry+1, "entries past the size %d", size); err != nil {
		return err
	}
	if err := s.mustBeEmpty(checkpointKey(size+1), kindCheckpoint+1, "checkpoints past the size %d", size); err != nil {
		return err
	}

	// The compact range is the stored nodes it names.
	for i, id := range compact.RangeNodes(0, size, nil) {
		h, closer, err := s.r.Get(nodeKey(id))
		if errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("%w: node (%d, %d) of the compact range of size %d is missing", ErrCorrupt, id.Level, id.Index, size)
		} else if err != nil {
			return s.readError(fmt.Errorf("reading node (%d, %d): %w", id.Level, id.Index, err))
		}
		ok := bytes.Equal(h, rng[i])
		closer.Close()
		if !ok {
			return fmt.Errorf("%w: node (%d, %d) differs from the compact range of size %d", ErrCorrupt, id.Level, id.Index, size)
		}
	}

	cp, closer, err := s.r.Get(checkpointKey(size))
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: checkpoint for size %d is missing", ErrCorrupt, size)
	} else if err != nil {
		return s.readError(fmt.Errorf("reading checkpoint %d: %w", size, err))
	}
	s.state = log.State{Size: size, Range: rng, Checkpoint: bytes.Clone(cp)}
	closer.Close()
	if s.hot, err = loadHot(s.r, size, s.hot.Max()); err != nil {
		return s.readError(fmt.Errorf("reading the upper levels of the tree: %w", err))
	}
	s.chunks.chunked = ci.chunked
	if ci.bits == 0 && ci.chunked < size { // version 3, chunks' size not named
		if ci.bits, err = unnamedChunkBits(s.r, size, ci.chunked, s.chunks.bits); err != nil {
			return err
		}
	}
	if ci.bits != 0 {
		s.chunks.bits = ci.bits // the store's, whatever this program would choose
	}
	return nil
}

func (s *Store) mustHave(size uint64, key []byte, format string, args ...any) error {
	_, closer, err := s.r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: state says size %d, but %s is missing", ErrCorrupt, size, fmt.Sprintf(format, args...))
	} else if err != nil {
		return s.readError(fmt.Errorf("reading %s: %w", fmt.Sprintf(format, args...), err))
	}
	closer.Close()
	return nil
}

func (s *Store) mustBeEmpty(lower []byte, upperKind byte, format string, args ...any) error {
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{upperKind}})
	if err != nil {
		return s.readError(err)
	}
	defer it.Close()
	if it.First() {
		return fmt.Errorf("%w: found %s (key %x)", ErrCorrupt, fmt.Sprintf(format, args...), it.Key())
	}
	return s.readError(it.Error())
}

// eventListener routes the events of the Pebble instance on fs into the
// store's failure (not once fs is retired).
func (s *Store) eventListener(fs *pebbleguard.FS) *pebble.EventListener {
	return fs.EventListener(s.logf, s.errorf, s.dir, ErrCorrupt)
}

// fail makes every later Commit fail with err. The first failure wins and
// is logged.
func (s *Store) fail(err error) {
	s.mu.Lock()
	first := s.failure == nil
	if first {
		s.failure = err
		close(s.failed)
	}
	s.mu.Unlock()
	if first {
		s.errorf("logpebble: the log store stopped accepting commits: %v", err)
	}
}

// Err implements [log.Health]: why the store refuses commits, or nil.
// Once set it stays set until the store is reopened.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// warn records w, damage found on opening that lost nothing, for Verify
// to report, and says it.
func (s *Store) warn(w string) {
	s.errorf("logpebble: warning: %s", w)
	s.warnings = append(s.warnings, w)
}

// corrupt records that the store found itself corrupt, so that commits stop,
// and returns err.
func (s *Store) corrupt(err error) error {
	s.errorf("logpebble: %v", err)
	s.fail(err)
	return err
}

// readError returns err, failing the store closed if Pebble says the data
// is corrupt.
func (s *Store) readError(err error) error {
	switch {
	case err == nil:
		return nil
	case pebble.IsCorruptionError(err):
		return s.corrupt(fmt.Errorf("%w: %w", ErrCorrupt, err))
	case errors.Is(err, syscall.EIO):
		err = log.FileFault("reading", s.dir, err)
		s.fail(err)
		return err
	}
	return err
}

// closePebble closes Pebble and releases the lock, unless a panic inside
// Pebble may have left its locks held: then closing could hang, and the
// process's exit releases both ([pebbleguard.FS.Close]).
func (s *Store) closePebble() error {
	if s.db == nil {
		return nil // a Reopen failed: nothing is open
	}
	if s.pub != nil {
		s.pub.close()
	}
	if b, ok := s.r.(*pebble.Batch); ok {
		b.Close()
	}
	switch {
	case s.fs.Wedged():
		s.errorf("logpebble: not closing Pebble in %s: it panicked, and may hold its locks", s.dir)
	case s.fs.Held():
		// The file system is frozen (log/pebbleguard), so the abandoned
		// instance changes nothing on disk, and the directory lock is
		// released, so that the store can be reopened (in this process
		// too).
		s.errorf("logpebble: not closing Pebble in %s: a commit is held up in it since the store failed", s.dir)
	}
	return s.fs.Close(s.db, s.lock)
}

// reconcile checks the stored tree against the published records (oldest
// first) and restores a batch a record holds that Pebble lost: with a
// commit, or, read-only, in an overlay of indexed batches that every read
// goes through. It opens the publisher if the store can commit.
func (s *Store) reconcile(readOnly bool) error {
	rs, torn, err := readRecords(s.dir)
	if err != nil {
		return err
	}
	for _, name := range torn {
		// The other slot's record is older: a batch the WAL lost after
		// it would go unseen. A power loss during the slot's write
		// tears it too, but a write that loses nothing cannot be told
		// from one that does.
		s.warn(fmt.Sprintf("%s holds a torn or damaged record of the published batches (a write cut by a power loss, or damage); the older record in the other slot was used", name))
	}
	const source = "the store's published-batch record"
	if n := len(rs); n > 0 {
		// Name the newest batch acknowledged when more than the records
		// hold is gone.
		last, st := rs[n-1], s.state
		if st.Size < last.start && (n == 1 || st.Size != rs[0].start || rs[0].size != last.start) {
			return &log.LostError{Source: source, Size: last.size, Root: log.RangeRoot(last.size, last.rng), HeldSize: st.Size, HeldRoot: log.RangeRoot(st.Size, st.Range)}
		}
	}
	for _, r := range rs {
		st := s.state
		switch {
		case st.Size >= r.size:
			held, err := s.rangeAt(r.size)
			if err != nil {
				return err
			}
			if root := log.RangeRoot(r.size, r.rng); !bytes.Equal(log.RangeRoot(r.size, held), root) {
				return &log.LostError{Source: source, Size: r.size, Root: root, HeldSize: st.Size, HeldRoot: log.RangeRoot(r.size, held)}
			}
		case st.Size == r.start:
			b, err := redo(st, r)
			if err != nil {
				return err
			}
			if err := s.restore(b, readOnly || s.Err() != nil); err != nil {
				return fmt.Errorf("restoring batch [%d, %d) from the published record: %w", r.start, r.size, err)
			}
			// Pebble synced the batch before it was published: its
			// write-ahead log lost a synced write. Nothing is lost, but
			// the disk did not keep what it said it had.
			s.warn(fmt.Sprintf("batch [%d, %d) was restored from the published record: Pebble's write-ahead log had lost it, though it was synced before the batch was acknowledged (the disk lost or damaged a write)", r.start, r.size))
		case st.Size < r.start:
			return &log.LostError{Source: source, Size: r.size, Root: log.RangeRoot(r.size, r.rng), HeldSize: st.Size, HeldRoot: log.RangeRoot(st.Size, st.Range)}
		default:
			return fmt.Errorf("%w: the stored tree of size %d ends inside the published batch [%d, %d)", ErrCorrupt, st.Size, r.start, r.size)
		}
	}
	if readOnly || s.Err() != nil {
		return nil
	}
	s.pub, err = openPublisher(s.dir, rs, s.fail)
	if err != nil {
		s.fail(err)
		s.errorf("logpebble: cannot write the published record, so the store takes no commits: %v", err)
	}
	return nil
}

// rangeAt reads the compact range of the stored tree at size.
func (s *Store) rangeAt(size uint64) ([][]byte, error) {
	if size == s.state.Size {
		return s.state.Range, nil
	}
	var rng [][]byte
	for _, id := range compact.RangeNodes(0, size, nil) {
		h, closer, err := s.r.Get(nodeKey(id))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, fmt.Errorf("%w: node (%d, %d) of the tree of size %d is missing", ErrCorrupt, id.Level, id.Index, size)
		} else if err != nil {
			return nil, s.readError(fmt.Errorf("reading node (%d, %d): %w", id.Level, id.Index, err))
		}
		rng = append(rng, bytes.Clone(h))
		closer.Close()
	}
	return rng, nil
}

// restore applies a batch rebuilt from the published record, and makes
// its state the store's.
func (s *Store) restore(b *log.Batch, overlay bool) error {
	if overlay {
		ib := s.db.NewIndexedBatch()
		if old, ok := s.r.(*pebble.Batch); ok {
			// A second restored batch: carry the first one's keys over.
			if err := ib.Apply(old, nil); err != nil {
				return err
			}
			old.Close()
		}
		if err := fillBatch(ib, ib, b, s.chunks); err != nil {
			return err
		}
		s.r = ib
	} else {
		pb := s.db.NewBatchWithSize(batchSize(b, s.chunks))
		if err := fillBatch(pb, s.r, b, s.chunks); err != nil {
			pb.Close()
			return err
		}
		if err := s.commitPebble(pb); err != nil {
			return err
		}
		if err := s.Err(); err != nil {
			return err
		}
	}
	s.state = log.State{Size: b.State.Size, Range: cloneHashes(b.State.Range), Checkpoint: bytes.Clone(b.State.Checkpoint)}
	hot, err := loadHot(s.r, s.state.Size, s.hot.Max())
	if err != nil {
		return s.readError(fmt.Errorf("reading the upper levels of the tree: %w", err))
	}
	s.hot = hot
	return nil
}
