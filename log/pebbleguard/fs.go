package pebbleguard

// The file system Pebble writes through. It turns the first write error
// into the store's sticky failure and keeps Pebble v2.1.7 from reaching the
// code paths where a write error takes the whole process down:
//
//   - DB.Apply panics when the write-ahead log refuses a record
//     (commitWrite: panic(err)), and Logger.Fatalf is called on a failed
//     commit;
//   - rotating to a new WAL panics when the new file cannot be created or
//     the old one cannot be closed, after unlocking DB.mu, so the unwinding
//     unlocks it a second time: "fatal error: sync: unlock of unlocked
//     mutex", which no recover catches (seen on a read-only bind mount);
//   - a failed flush is retried at once, forever (compaction.go: "TODO:
//     count consecutive flush errors and backoff"): 100% CPU and a log line
//     per attempt on a full disk;
//   - a failed MANIFEST or marker write calls Logger.Fatalf, after which
//     Pebble's in-memory bookkeeping is no longer sound (isJournal).
//
// So the journals (WAL, MANIFEST, markers) never show Pebble an error: the
// first one is the store's failure, and once the store has failed they are
// never touched again (writes, syncs and new files succeed without doing
// anything); nothing is removed, renamed or linked (no file Pebble
// thinks obsolete is deleted on the word of a MANIFEST that may not have
// reached the disk); and creating any other file waits with a growing
// backoff before it fails, which turns Pebble's retry loop into one attempt
// every few seconds. The store checks the failure after each Pebble commit
// returns, so a commit whose WAL write was swallowed is reported failed
// (outcome unknown), never acknowledged.
//
// Every file Pebble makes or opens for writing through an FS is made 0600
// whatever the umask (Pebble's vfs.Default creates with 0666 less the
// umask: under umask 000 every sstable and WAL was world-readable and
// writable, so a copy of db/ or a bind mount of it exposed every entry).
// Nothing needs more: the sidecar reads its store as the user that wrote
// it, and a backup runs as that user or as root. Directories it makes are
// 0700 at most.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log"
)

// fileMode is the mode of every file an FS creates or opens for writing;
// dirMode bounds that of the directories it makes.
const (
	fileMode = 0o600
	dirMode  = 0o700
)

// Backoff of file creation after a failure.
const (
	failedCreateFirstWait = 500 * time.Millisecond
	failedCreateMaxWait   = 30 * time.Second
)

// An FS is the file system of one guarded Pebble instance; see the top of
// fs.go. Its methods are the vfs.FS ones and the store's controls below.
type FS struct {
	vfs.FS
	fail   func(error) // records the store's failure (first one wins)
	failed func() bool

	closing chan struct{} // closed by EndWaits
	endOnce sync.Once

	// retired is set by Retire.
	retired atomic.Bool
	// held and wedged are set by Commit: a commit is held in the
	// instance, or Pebble panicked in one.
	held, wedged atomic.Bool

	// roLock is set when the directory lock could only be checked, not
	// taken, because the file system is read-only (lock_unix.go).
	roLock atomic.Bool

	mu   sync.Mutex
	wait time.Duration // the next backoff of a failed Create
}

// NewFS wraps inner for one Pebble instance of a store. fail records the
// store's failure (the first call wins; it is called from Pebble's
// goroutines, and never after Retire), and failed reports whether the
// store has failed.
func NewFS(inner vfs.FS, fail func(error), failed func() bool) *FS {
	return &FS{FS: inner, fail: fail, failed: failed, closing: make(chan struct{})}
}

// Retire is called when the store lets this instance go (closed, or
// abandoned while Pebble held it) to open another on a new FS: the old
// instance must never touch the disk again, nor fail the store that
// replaced it.
func (f *FS) Retire() { f.retired.Store(true) }

// Retired reports whether Retire was called.
func (f *FS) Retired() bool { return f.retired.Load() }

// ReadOnlyLock reports whether Lock could only check the directory lock,
// not take it, because the file system is read-only: the store must open
// Pebble read-only.
func (f *FS) ReadOnlyLock() bool { return f.roLock.Load() }

// EndWaits ends the backoff of failed creations, now and later: call it
// when the store closes the instance, so that Close is quick. An instance
// abandoned instead keeps its waits: its background retries stay one
// every few seconds, not a spin.
func (f *FS) EndWaits() { f.endOnce.Do(func() { close(f.closing) }) }

// isJournal reports whether name is one of Pebble's journals: a
// write-ahead log, a MANIFEST or a marker file (which names the current
// MANIFEST or format version). Pebble v2.1.7 cannot survive an error
// writing one: a failed WAL write panics, and a failed MANIFEST or marker
// write calls Logger.Fatalf ("treating such errors as fatal is preferred
// to attempting to unwind ... L0 sublevel metadata", version_set.go), so
// carrying on after it leaves Pebble's L0 bookkeeping out of step with its
// versions, which a later compaction trips over (seen: a panic inside a
// compaction after an injected MANIFEST fault). Their errors are recorded
// as the store's failure and hidden from Pebble, and once the store has
// failed they are not written at all: Pebble's memory stays consistent
// with itself, and the disk keeps the state it had when the store failed.
func isJournal(name string) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	return strings.HasSuffix(base, ".log") || strings.HasPrefix(base, "MANIFEST-") || strings.HasPrefix(base, "marker.")
}

// failOn records err (if not nil) as the store's failure and returns it
// classified.
func (f *FS) failOn(op, name string, err error) error {
	if err == nil {
		return nil
	}
	err = log.FileFault(op, name, err)
	f.Record(err)
	return err
}

// Record makes err the store's failure, unless this file system is
// retired: then it belongs to an instance the store no longer uses.
func (f *FS) Record(err error) {
	if !f.retired.Load() {
		f.fail(err)
	}
}

// Stopped reports whether the file system is frozen: the store failed,
// or this file system was retired.
func (f *FS) Stopped() bool { return f.retired.Load() || f.failed() }

// frozen is the error of a mutation refused after the store failed.
func frozen(op, name string) error {
	return fmt.Errorf("store has failed: not %s %s", op, name)
}

// backoff waits before a failed store's Create fails.
func (f *FS) backoff() {
	f.mu.Lock()
	d := f.wait
	if d == 0 {
		d = failedCreateFirstWait
	}
	f.wait = min(2*d, failedCreateMaxWait)
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.closing:
	}
}

func (f *FS) create(op, name string, open func() (vfs.File, error)) (vfs.File, error) {
	if f.Stopped() {
		if isJournal(name) {
			return nopFile{}, nil
		}
		f.backoff()
		return nil, frozen(op, name)
	}
	file, err := open()
	if err == nil {
		if err = private(file); err != nil {
			file.Close()
		}
	}
	if err != nil {
		err = f.failOn(op, name, err)
		if isJournal(name) {
			return nopFile{}, nil
		}
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name, journal: isJournal(name)}, nil
}

func (f *FS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.create("creating", name, func() (vfs.File, error) { return f.FS.Create(name, c) })
}

func (f *FS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.create("reusing", name, func() (vfs.File, error) { return f.FS.ReuseForWrite(old, name, c) })
}

func (f *FS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.create("opening", name, func() (vfs.File, error) { return f.FS.OpenReadWrite(name, c, opts...) })
}

func (f *FS) OpenDir(name string) (vfs.File, error) {
	d, err := f.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: d, fs: f, name: name, dir: true}, nil
}

func (f *FS) mutate(op, name string, do func() error) error {
	if f.Stopped() {
		return frozen(op, name)
	}
	err := do()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f.failOn(op, name, err)
	}
	return err
}

func (f *FS) Remove(name string) error {
	return f.mutate("removing", name, func() error { return f.FS.Remove(name) })
}

func (f *FS) RemoveAll(name string) error {
	return f.mutate("removing", name, func() error { return f.FS.RemoveAll(name) })
}

func (f *FS) Rename(old, name string) error {
	return f.mutate("renaming to", name, func() error { return f.FS.Rename(old, name) })
}

func (f *FS) Link(old, name string) error {
	return f.mutate("linking", name, func() error { return f.FS.Link(old, name) })
}

func (f *FS) MkdirAll(dir string, perm fs.FileMode) error {
	return f.mutate("making", dir, func() error { return f.FS.MkdirAll(dir, perm&dirMode) })
}

// Lock takes Pebble's directory lock. On a read-only file system, where
// the lock file cannot be opened for writing, it checks that no other
// process holds the lock instead, and the store opens read-only.
func (f *FS) Lock(name string) (io.Closer, error) {
	// Pebble's Lock creates the lock file 0666 less the umask and keeps
	// the mode of one that exists: make it first, 0600. If that fails,
	// Lock fails for the same reason, or the file system is read-only.
	if lf, err := f.FS.OpenReadWrite(name, vfs.WriteCategoryUnspecified); err == nil {
		private(lf)
		lf.Close()
	}
	c, err := f.FS.Lock(name)
	if err != nil && (errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission)) {
		rc, rerr := readOnlyLock(name)
		var pe *fs.PathError
		if rerr != nil && !errors.As(rerr, &pe) {
			return nil, rerr // held by another process
		} else if rerr != nil {
			return nil, err
		}
		f.roLock.Store(true)
		return rc, nil
	}
	return c, err
}

// Unwrap is the inner file system, as vfs.FS asks.
func (f *FS) Unwrap() vfs.FS { return f.FS }

// faultFile is a file written through an FS. A journal's or a
// directory's write errors are recorded and swallowed (see the top of
// fs.go); other files' are recorded and returned.
type faultFile struct {
	vfs.File
	fs      *FS
	name    string
	journal bool // a WAL, MANIFEST or marker (isJournal)
	dir     bool
}

// skip reports whether a write to f is not to be done: the store failed and
// f is a journal or a directory.
func (f *faultFile) skip() bool { return (f.journal || f.dir) && f.fs.Stopped() }

// retired is the error of a write to a file, not a journal or a directory, of
// a retired file system (nil if it is not retired).
func (f *faultFile) retired(op string) error {
	if f.fs.retired.Load() && !f.journal && !f.dir {
		return frozen(op, f.name)
	}
	return nil
}

// result records err and says what to return to Pebble.
func (f *faultFile) result(op string, err error) error {
	err = f.fs.failOn(op, f.name, err)
	if f.journal || f.dir {
		return nil
	}
	return err
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.retired("writing"); err != nil {
		return 0, err
	}
	if f.skip() {
		return len(p), nil
	}
	n, err := f.File.Write(p)
	if err != nil && (f.journal || f.dir) {
		n = len(p)
	}
	return n, f.result("writing", err)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.retired("writing"); err != nil {
		return 0, err
	}
	if f.skip() {
		return len(p), nil
	}
	n, err := f.File.WriteAt(p, off)
	if err != nil && (f.journal || f.dir) {
		n = len(p)
	}
	return n, f.result("writing", err)
}

func (f *faultFile) Sync() error {
	if err := f.retired("syncing"); err != nil {
		return err
	}
	if f.skip() {
		return nil
	}
	return f.result("syncing", f.File.Sync())
}

func (f *faultFile) SyncData() error {
	if err := f.retired("syncing"); err != nil {
		return err
	}
	if f.skip() {
		return nil
	}
	return f.result("syncing", f.File.SyncData())
}

func (f *faultFile) SyncTo(length int64) (bool, error) {
	if err := f.retired("syncing"); err != nil {
		return false, err
	}
	if f.skip() {
		return true, nil
	}
	full, err := f.File.SyncTo(length)
	if err != nil && (f.journal || f.dir) {
		full = true
	}
	return full, f.result("syncing", err)
}

func (f *faultFile) Preallocate(off, n int64) error {
	if err := f.retired("allocating"); err != nil {
		return err
	}
	if f.skip() {
		return nil
	}
	return f.result("allocating", f.File.Preallocate(off, n))
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.skip() {
		return nil
	}
	return f.result("closing", err)
}

// nopFile stands in for a journal that could not be created, or is
// created after the store failed: it takes every write and keeps nothing.
type nopFile struct{}

func (nopFile) Close() error                           { return nil }
func (nopFile) Read([]byte) (int, error)               { return 0, io.EOF }
func (nopFile) ReadAt([]byte, int64) (int, error)      { return 0, io.EOF }
func (nopFile) Write(p []byte) (int, error)            { return len(p), nil }
func (nopFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (nopFile) Preallocate(int64, int64) error         { return nil }
func (nopFile) Stat() (vfs.FileInfo, error)            { return nopInfo{}, nil }
func (nopFile) Sync() error                            { return nil }
func (nopFile) SyncTo(int64) (bool, error)             { return true, nil }
func (nopFile) SyncData() error                        { return nil }
func (nopFile) Prefetch(int64, int64) error            { return nil }
func (nopFile) Fd() uintptr                            { return vfs.InvalidFd }

// nopInfo describes a nopFile: empty.
type nopInfo struct{}

func (nopInfo) Name() string           { return "unwritten.log" }
func (nopInfo) Size() int64            { return 0 }
func (nopInfo) Mode() fs.FileMode      { return 0o600 }
func (nopInfo) ModTime() time.Time     { return time.Time{} }
func (nopInfo) IsDir() bool            { return false }
func (nopInfo) Sys() any               { return nil }
func (nopInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
