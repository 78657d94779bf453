package witnesspebble

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/pebbleguard"
)

// hungAfter is how long a test waits before it reports a call hung: far
// beyond what a store that is not hung takes, not a bound on its speed.
const hungAfter = 5 * time.Minute

// await returns what ch gives, failing t if ch gives nothing for hungAfter.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hungAfter):
		t.Fatalf("%s hung", what)
		panic("unreachable")
	}
}

// TestHeldWriteFails: a write waits inside Pebble, in a write stall (its
// memtables are full, and the flush that would empty one is held up at its
// table's sync), when that sync fails with EIO. Pebble never completes a
// flush on the failed store, so the write waited for ever, holding its
// key's lock and the KV's (so Close waited too; over HTTP, a witness
// request hung holding its log's lock). The write now fails with ErrFailed
// naming the fault, Close returns, and the directory opens again.
func TestHeldWriteFails(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	stalled := make(chan struct{})
	var stallOnce sync.Once
	kv := openStalling(t, dir, release, func() { stallOnce.Do(func() { close(stalled) }) })
	done := fill(kv)
	select {
	case <-stalled:
	case err := <-done:
		t.Fatalf("a write failed before one waited in a write stall: %v", err)
	case <-time.After(hungAfter):
		t.Fatal("no write stall")
	}
	close(release) // the held flush's sync fails: the KV fails
	err := await(t, done, "the write held in Pebble when the KV failed")
	if !errors.Is(err, ErrFailed) || !errors.Is(err, log.ErrIO) {
		t.Errorf("the held write: %v, want ErrFailed naming an I/O error", err)
	}
	if _, err := kv.Get([]byte("k")); !errors.Is(err, ErrFailed) {
		t.Errorf("Get after the fault: %v, want ErrFailed", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- kv.Close() }()
	if err := await(t, closed, "Close"); err != nil {
		t.Errorf("Close: %v", err)
	}
	reopenHolds(t, dir)
}

// openStalling opens a KV in dir, with "k" set to "v", whose first flush
// is held up at its table's sync until release is closed (nil: for good)
// and then fails with EIO. stall is called when a write begins to wait in
// the write stall that follows, on the write's goroutine, inside Pebble's
// commit pipeline.
func openStalling(t *testing.T, dir string, release <-chan struct{}, stall func()) *KV {
	t.Helper()
	var holdOnce sync.Once
	inj := errorfs.InjectorFunc(func(op errorfs.Op) (err error) {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if strings.HasSuffix(op.Path, ".sst") {
				holdOnce.Do(func() {
					<-release
					err = syscall.EIO
				})
			}
		}
		return err
	})
	logf := func(format string, args ...any) {
		if strings.HasPrefix(fmt.Sprintf(format, args...), "pebble: write stall beginning") {
			stall()
		}
	}
	kv, err := open(dir, errorfs.Wrap(vfs.Default, inj), logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.CompareAndSwap([]byte("k"), nil, []byte("v")); err != nil {
		t.Fatal(err)
	}
	return kv
}

// fill writes 60 KiB values to key "filler" of kv, on a goroutine of its
// own, until a write fails, and sends that write's error: the memtables
// fill, and Pebble flushes them.
func fill(kv *KV) <-chan error {
	done := make(chan error, 1)
	go func() {
		var old []byte
		for {
			v := make([]byte, 60<<10)
			rand.Read(v)
			if err := kv.CompareAndSwap([]byte("filler"), old, v); err != nil {
				done <- err
				return
			}
			old = v
		}
	}()
	return done
}

// reopenHolds checks that the store in dir opens, on a sound file system,
// and that key "k" holds "v".
func reopenHolds(t *testing.T, dir string) {
	t.Helper()
	kv, err := Open(dir)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer kv.Close()
	if v, err := kv.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("reopened, Get = %q, %v; want v", v, err)
	}
}

// TestOpenFullDiskFails: the witness restarts on a disk that is still
// full, and Pebble must flush what it replays from the write-ahead log
// before its Open returns; the disk refuses the table (ENOSPC). Pebble
// retried the flush for ever, and Open never returned. It now fails,
// saying the disk is full, and the store opens once the disk has room.
func TestOpenFullDiskFails(t *testing.T) {
	dir := t.TempDir()
	kv, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.CompareAndSwap([]byte("k"), nil, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Close(); err != nil { // "k" is in the WAL only
		t.Fatal(err)
	}

	full := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") {
			return syscall.ENOSPC
		}
		return nil
	}))
	opened := make(chan error, 1)
	go func() {
		kv, err := open(dir, full, nil)
		if err == nil {
			kv.Close()
		}
		opened <- err
	}()
	if err := await(t, opened, "Open on a full disk"); !errors.Is(err, log.ErrDiskFull) {
		t.Fatalf("Open on a full disk: %v, want an error naming a full disk", err)
	}
	reopenHolds(t, dir)
}

// TestPanicInWrite: Pebble panics in a write, inside its commit pipeline
// and holding the pipeline's lock (here the handler of a write stall
// panics: the first flush is held up at its table's sync, so the
// memtables fill). The guard turns the panic into the write's error, and
// the witness failed the store; but its Close then closed Pebble, whose
// Close takes the lock the panic left held: Close hung. Now the write and
// every call after it fail with ErrFailed naming the panic, and Close
// returns without touching the instance.
func TestPanicInWrite(t *testing.T) {
	// The flush is never released, so the instance left alone writes
	// nothing more to the directory.
	kv := openStalling(t, t.TempDir(), nil, func() { panic("a stall") })
	err := await(t, fill(kv), "the writes until one stalls")
	if !errors.Is(err, ErrFailed) || !errors.Is(err, pebbleguard.ErrPanicked) || !strings.Contains(err.Error(), "a stall") {
		t.Fatalf("the write Pebble panicked in: %v, want ErrFailed naming the panic", err)
	}
	t.Logf("the write said: %v", err)
	if err := kv.CompareAndSwap([]byte("k"), []byte("v"), []byte("w")); !errors.Is(err, ErrFailed) || !errors.Is(err, pebbleguard.ErrPanicked) {
		t.Errorf("a write after the panic: %v, want ErrFailed naming the panic", err)
	}
	if _, err := kv.Get([]byte("k")); !errors.Is(err, ErrFailed) || !errors.Is(err, pebbleguard.ErrPanicked) {
		t.Errorf("Get after the panic: %v, want ErrFailed naming the panic", err)
	}
	closed := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				closed <- fmt.Errorf("Close panicked: %v", r)
			}
		}()
		closed <- kv.Close()
	}()
	if err := await(t, closed, "Close after a panic in Pebble"); err != nil {
		t.Errorf("Close after a panic in Pebble: %v", err)
	}
}
