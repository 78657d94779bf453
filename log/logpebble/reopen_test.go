package logpebble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
)

// fullFS is a disk that can be made full: while full, every write,
// preallocation and file creation fails with ENOSPC and the disk reports
// no free space.
type fullFS struct {
	vfs.FS
	full atomic.Bool
}

func (f *fullFS) enospc(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
}

func (f *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() {
		return nil, f.enospc("create", name)
	}
	file, err := f.FS.Create(name, c)
	return f.wrap(file, name, err)
}

func (f *fullFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() {
		return nil, f.enospc("create", name)
	}
	file, err := f.FS.ReuseForWrite(old, name, c)
	return f.wrap(file, name, err)
}

func (f *fullFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.wrap(file, name, err)
}

func (f *fullFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if f.full.Load() {
		return vfs.DiskUsage{TotalBytes: 1 << 30, UsedBytes: 1 << 30}, nil
	}
	return vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 1 << 30}, nil
}

func (f *fullFS) wrap(file vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &fullFile{File: file, fs: f, name: name}, nil
}

type fullFile struct {
	vfs.File
	fs   *fullFS
	name string
}

func (f *fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, f.fs.enospc("write", f.name)
	}
	return f.File.Write(p)
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.full.Load() {
		return 0, f.fs.enospc("write", f.name)
	}
	return f.File.WriteAt(p, off)
}

func (f *fullFile) Preallocate(off, n int64) error {
	if f.fs.full.Load() {
		return f.fs.enospc("fallocate", f.name)
	}
	return f.File.Preallocate(off, n)
}

// TestResumeAfterDiskFull fills the disk under 8 appenders while proofs
// are read: appends stop with "disk full"; while the disk stays full the
// log does not resume and the store is left alone (reads go on); once
// space is freed, the sequencer's own retry (RetryDiskFull) reopens the
// store in place: every acknowledged entry and checkpoint is there, the
// log appends again, readers saw no error but "try again", and a restart
// finds the same log.
func TestResumeAfterDiskFull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	disk := &fullFS{FS: vfs.Default}
	signer, v := logtest.NewKey(t, "faults.example/log")
	s, err := Open(dir, faultOptions(t, disk))
	if err != nil {
		t.Fatal(err)
	}
	seq, err := server.OpenSequencer(ctx, s, signer, v, &server.SequencerOptions{
		RetryDiskFull: 5 * time.Millisecond,
		Genesis:       func() ([]byte, error) { return log.Genesis(time.Unix(1764547200, 0), v.Name(), "", []byte{1}, "test") },
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &faultLog{t: t, dir: dir, signer: signer, v: v, store: s, seq: seq}

	// Readers prove the newest entries throughout.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var readErrs atomic.Int64
	var stopOnce sync.Once
	stopReaders := func() { stopOnce.Do(func() { close(stop) }); readers.Wait() }
	t.Cleanup(stopReaders) // also when the test fails before it stops them
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				size, _ := seq.Checkpoint()
				if size == 0 {
					continue
				}
				if _, err := log.ProveInclusion(ctx, s, size-1, size); err != nil && !errors.Is(err, log.ErrUnavailable) {
					t.Errorf("proof during the fault and the reopen: %v", err)
					return
				} else if err != nil {
					readErrs.Add(1)
				}
			}
		})
	}

	go func() {
		time.Sleep(300 * time.Millisecond)
		disk.full.Store(true)
	}()
	errs := l.appendAll("full", 100000, 8)
	if len(errs) == 0 {
		t.Fatal("the appends never met the full disk")
	}
	for _, err := range errs {
		if !errors.Is(err, log.ErrDiskFull) {
			t.Fatalf("append refused without saying the disk is full: %v", err)
		}
	}
	if err := seq.Err(); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("sequencer: %v", err)
	}
	before := len(l.acked)
	t.Logf("%d appends acknowledged before the disk filled: %v", before, errs[0])

	// Still full: the retries leave the store alone.
	time.Sleep(100 * time.Millisecond)
	if err := seq.Resume(ctx); !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "still full") {
		t.Fatalf("Resume on a full disk: %v", err)
	}
	if err := seq.Err(); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("sequencer on a still full disk: %v", err)
	}

	disk.full.Store(false)
	// The retries back off up to 30 s while the disk stays full (the
	// appenders above keep it full for a while, minutes under -race), so
	// the resume may come up to 30 s after the space is freed.
	waitForWithin(t, 90*time.Second, "the retry to resume the log", func() bool { return seq.Err() == nil })
	stopReaders()
	checkHolds(t, s, v, l.acked)
	if errs := l.appendAll("freed", 200, 8); len(errs) > 0 {
		t.Fatalf("appending after space was freed: %v", errs[0])
	}
	t.Logf("resumed; %d proofs were told to try again while the store reopened", readErrs.Load())

	seq.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkReopen(t, dir, v, l.acked)
}

// TestReopenRefuses: a store opened read-only, a corrupt one and a sound
// one are not reopened, and say why.
func TestReopenRefuses(t *testing.T) {
	dir := t.TempDir()
	flushedLog(t, dir, 50)
	ro, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Reopen(t.Context()); !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Reopen of a read-only store: %v", err)
	}
	ro.Close()

	s, err := Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Reopen(t.Context()); !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "not failed") {
		t.Errorf("Reopen of a sound store: %v", err)
	}
	s.eventListener(s.fs).BackgroundError(fmt.Errorf("%w: checksum", ErrCorrupt))
	if err := s.Reopen(t.Context()); !errors.Is(err, ErrNotReopened) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("Reopen of a corrupt store: %v", err)
	}
}

// TestOpenFullDiskReplay opens, on a full disk, a store whose WAL Pebble
// must replay and flush before its Open returns (a store closed with
// everything in the WAL): the flush cannot be written, and Pebble retries
// it for ever, so Open gives up on that instance and opens read-only,
// saying the disk is full; every acknowledged entry is read. Once space is
// back, Reopen makes it writable.
func TestOpenFullDiskReplay(t *testing.T) {
	dir := t.TempDir()
	ack := writeLog(t, dir, 40)
	disk := &fullFS{FS: vfs.Default}
	disk.full.Store(true)
	s, err := Open(dir, faultOptions(t, disk))
	if err != nil {
		t.Fatalf("Open on a full disk: %v", err)
	}
	defer s.Close()
	if err := s.Err(); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("Err on a full disk: %v", err)
	}
	checkHoldsEntries(t, s, ack)
	disk.full.Store(false)
	if err := s.Reopen(context.Background()); err != nil {
		t.Fatalf("Reopen with space: %v", err)
	}
	checkHoldsEntries(t, s, ack)
}
