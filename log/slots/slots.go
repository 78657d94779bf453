// Package slots keeps a small record that changes with every commit, such
// as the last batch a store acknowledged or the newest checkpoint a
// sidecar showed, in two files overwritten in turn in place. It is the one
// implementation of that record: log/logpebble's published-batch record
// (published.0, published.1) and provlog's record of the checkpoints a
// sidecar on a shared store showed (handed-out.0, handed-out.1) use it.
//
// The files are written in place, not with log/durable's rename, because a
// rename and a directory sync per commit would cost more than the record
// is worth; the second slot and the record's own checksum do the rename's
// job.
//
// # Slots
//
// Each [Writer.Write] overwrites the slot that does not hold the newest
// record, from its first byte, so the other slot holds the record before
// it while it is written. The caller encodes the record, with a checksum,
// and parses it back ([Read]): a slot whose record does not parse (torn
// by a crash while it was written) is passed over for the other. A slot is
// empty when its file is missing or holds only zero bytes: each is
// zero-filled when made ([Options.Initial]) and grown, zero-filled and
// fully synced, when a record outgrows it, so that an fdatasync of a write
// syncs no metadata. Two slots that both hold something and neither a
// whole record are refused, naming both: the record is lost, and only the
// caller knows whether that may be accepted.
//
// # Durability
//
// With [Options.SyncInterval] zero, Write syncs the slot (fdatasync)
// before it returns: a nil error means the record is on disk, and at most
// the one slot being written can be torn, so a crash of the process or of
// the machine leaves the newest record a Write returned or the one before
// it, which the caller had not passed on yet. What is left is a disk that
// acknowledges a sync it did not do.
//
// With a positive SyncInterval, Write leaves its slot to a goroutine that
// syncs what changed at most that often, and [Writer.Close] syncs the
// rest. A process crash loses nothing written (the page cache keeps it). A
// machine crash may lose the records written in the last SyncInterval
// before it, and then the slots hold an older record; if the kernel had
// written back part of each slot, both may be torn, which Read refuses.
//
// # Faults
//
// A failed write or sync stops the Writer: it and every later Write
// return the error, which names the file, and a failed background sync is
// also passed to [Options.Fail]. After a failed fdatasync the kernel may
// have dropped the unsynced pages, so a retry that succeeds would prove
// nothing; the caller must stop handing out what it records.
package slots

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/durable"
)

// DefaultSyncInterval is the SyncInterval of the records that use a
// background sync: a machine crash loses at most this much of them.
const DefaultSyncInterval = 50 * time.Millisecond

// Options says where a record lives and how it is synced.
type Options struct {
	// Names are the files of slot 0 and slot 1.
	Names [2]string
	// Perm is the permission of files made.
	Perm fs.FileMode
	// Initial is the size each slot is zero-filled to when made: a record
	// that fits writes no new block.
	Initial int64
	// SyncInterval is how often a background goroutine syncs the slots
	// written since its last sync; zero syncs each Write before it
	// returns (see Durability in the package doc).
	SyncInterval time.Duration
	// Fail, if not nil, is called with the error of a failed background
	// sync, which stops the Writer.
	Fail func(error)
}

// A Slot is the whole record one slot holds, as the caller parsed it.
type Slot[T any] struct {
	Index int    // 0 or 1
	Seq   uint64 // the record's place in the sequence: a newer one has a larger Seq
	Value T
}

// Read reads both slots of o.Names and returns the whole records, oldest
// first, as parse reads them: it returns the record, its Seq, and false
// for bytes that hold no whole record; and the names of the slots that
// hold something but no whole record (a write cut by a power loss, or
// damage: the record it held or was to hold is not among those returned).
// A missing file is an empty slot. It fails with an error wrapping
// [log.ErrCorrupt] if both slots hold something and neither a whole
// record.
func Read[T any](o Options, parse func(b []byte) (v T, seq uint64, ok bool)) ([]Slot[T], []string, error) {
	var out []Slot[T]
	var torn []string
	for i, name := range o.Names {
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, nil, log.FileFault("reading", name, err)
		}
		if v, seq, ok := parse(b); ok {
			out = append(out, Slot[T]{Index: i, Seq: seq, Value: v})
		} else if !zero(b) {
			torn = append(torn, name)
		}
	}
	if len(torn) == 2 {
		return nil, nil, tornError(o.Names)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, torn, nil
}

// tornError names two slots that both hold something and neither a whole
// record; it wraps log.ErrCorrupt.
type tornError [2]string

func (e tornError) Error() string {
	return fmt.Sprintf("%s and %s both hold a torn or damaged record, and neither a whole one", e[0], e[1])
}

func (e tornError) Unwrap() error { return log.ErrCorrupt }

// Next returns the slot the first Write after a Read that returned rs
// overwrites: the one that does not hold the newest record.
func Next[T any](rs []Slot[T]) int {
	if len(rs) == 0 {
		return 0
	}
	return 1 - rs[len(rs)-1].Index
}

// zero reports whether b holds only zero bytes: a slot made and never
// written.
func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// A Writer writes the slots. One goroutine at a time may call Write.
type Writer struct {
	opts  Options
	files [2]*os.File
	cap   [2]int64 // the zero-filled length of each file
	next  int      // the slot the next Write overwrites

	mu    sync.Mutex
	dirty [2]bool
	err   error // once set, the Writer is stopped
	stop  chan struct{}
	done  chan struct{}
}

// Open opens the slots for writing, making and zero-filling them as
// needed, and syncs their directory; the first Write overwrites slot next
// (see [Next]).
func Open(opts Options, next int) (*Writer, error) {
	w := &Writer{opts: opts, next: next}
	for i, name := range opts.Names {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, opts.Perm)
		if err != nil {
			w.closeFiles()
			return nil, log.FileFault("opening", name, err)
		}
		w.files[i] = f
		fi, err := f.Stat()
		if err != nil {
			w.closeFiles()
			return nil, log.FileFault("reading", name, err)
		}
		w.cap[i] = fi.Size()
		if w.cap[i] < opts.Initial {
			if err := w.grow(i, opts.Initial); err != nil {
				w.closeFiles()
				return nil, err
			}
		}
	}
	for _, dir := range dirs(opts.Names) {
		if err := durable.SyncDir(dir); err != nil {
			w.closeFiles()
			return nil, log.FileFault("syncing", dir, err)
		}
	}
	if opts.SyncInterval > 0 {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.syncLoop()
	}
	return w, nil
}

func dirs(names [2]string) []string {
	a, b := filepath.Dir(names[0]), filepath.Dir(names[1])
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

// Write records b in the next slot: synced when it returns, or by the
// background goroutine (Options.SyncInterval). After an error the slot
// may be torn and the Writer is stopped: every later Write fails.
func (w *Writer) Write(b []byte) error {
	if err := w.Err(); err != nil {
		return err
	}
	i := w.next
	err := w.write(i, b)
	if err == nil && w.opts.SyncInterval == 0 {
		if serr := syncData(w.files[i]); serr != nil {
			err = log.FileFault("syncing", w.opts.Names[i], serr)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.err = stopped(err)
		return w.err
	}
	if w.opts.SyncInterval > 0 {
		w.dirty[i] = true
	}
	w.next = 1 - i
	return nil
}

// stopped is the error a stopped Writer returns.
func stopped(err error) error {
	return fmt.Errorf("the record stopped: %w", err)
}

func (w *Writer) write(i int, b []byte) error {
	if int64(len(b)) > w.cap[i] {
		if err := w.grow(i, int64(len(b))); err != nil {
			return err
		}
	}
	if _, err := w.files[i].WriteAt(b, 0); err != nil {
		return log.FileFault("writing", w.opts.Names[i], err)
	}
	return nil
}

// Err returns why the Writer stopped, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// grow zero-fills slot i to at least n bytes and syncs it, so that a
// Write does not change the file's size (an fdatasync then syncs no
// metadata).
func (w *Writer) grow(i int, n int64) error {
	n = max(n, 2*w.cap[i])
	f := w.files[i]
	if _, err := f.WriteAt(make([]byte, n-w.cap[i]), w.cap[i]); err != nil {
		return log.FileFault("writing", w.opts.Names[i], err)
	}
	if err := f.Sync(); err != nil {
		return log.FileFault("syncing", w.opts.Names[i], err)
	}
	w.cap[i] = n
	return nil
}

// syncLoop syncs the slots Write changed, every Options.SyncInterval,
// until Close or a failed sync.
func (w *Writer) syncLoop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := w.sync(); err != nil {
				if w.opts.Fail != nil {
					w.opts.Fail(err)
				}
				return
			}
		case <-w.stop:
			return
		}
	}
}

// sync syncs the slots written since the last sync; a failure stops the
// Writer.
func (w *Writer) sync() error {
	w.mu.Lock()
	dirty := w.dirty
	w.dirty = [2]bool{}
	w.mu.Unlock()
	for i, d := range dirty {
		if !d {
			continue
		}
		if err := syncData(w.files[i]); err != nil {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.err == nil {
				w.err = stopped(log.FileFault("syncing", w.opts.Names[i], err))
			}
			return w.err
		}
	}
	return nil
}

// Close stops the background syncs, syncs what they left, and closes the
// files. It returns why the Writer stopped, if it did, or the error of the
// last sync.
func (w *Writer) Close() error {
	if w.stop != nil {
		close(w.stop)
		<-w.done
		w.stop = nil
	}
	err := w.Err()
	if err == nil {
		err = w.sync()
	}
	if cerr := w.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (w *Writer) closeFiles() error {
	var errs []error
	for i, f := range w.files {
		if f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, log.FileFault("closing", w.opts.Names[i], err))
			}
			w.files[i] = nil
		}
	}
	return errors.Join(errs...)
}
