package witnesspebble

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

// faultsOn returns a toggle that, while on, fails the operations of the
// Pebble files match(op) picks with err.
func faultsOn(err error, match func(op errorfs.Op) bool) *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if match(op) {
			return err
		}
		return nil
	})}
}

// walFaults fails every write and sync of Pebble's write-ahead log.
func walFaults() *errorfs.Toggle {
	return faultsOn(errorfs.ErrInjected, func(op errorfs.Op) bool {
		return strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync)
	})
}

// TestWriteFaultCosignsNothingUndurable: the write-ahead log fails while a
// checkpoint is recorded. Pebble applies a batch to its memtable before
// the failed sync reports, so the failed record is readable though not
// durable: the witness read it back, answered 409 naming it, and cosigned
// it (and checkpoints built on it) when asked from that size, while the
// disk still held the old one.
func TestWriteFaultCosignsNothingUndurable(t *testing.T) {
	cosignThrough(t, walFaults(), false, log.ErrIO)
}

// TestFlushFaultStopsTheStore: the disk refuses a flush's table (ENOSPC
// creating it). Pebble v2.1.7 retried the flush at once, for ever (53,030
// attempts in 5 s), and once its memtables were full the next write
// waited for good, holding its log's lock: the test hung (go test
// -timeout ended it).
func TestFlushFaultStopsTheStore(t *testing.T) {
	cosignThrough(t, faultsOn(syscall.ENOSPC, func(op errorfs.Op) bool {
		return op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst")
	}), true, log.ErrDiskFull)
}

// TestWALRotationFaultStopsTheStore: the disk refuses the second
// write-ahead log, created when the first memtable fills. Pebble v2.1.7
// panicked after unlocking its mutex, and the unwinding unlocked it again:
// "fatal error: sync: unlock of unlocked mutex" ended the test binary.
func TestWALRotationFaultStopsTheStore(t *testing.T) {
	cosignThrough(t, faultsOn(syscall.ENOSPC, func(op errorfs.Op) bool {
		return (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite) && strings.HasSuffix(op.Path, ".log")
	}), true, log.ErrDiskFull)
}

// cosignThrough runs a witness over HTTP on a KV whose file system fails
// as faults says once it is on, until a request is refused; then the disk
// heals. With fill, 60 KiB values are written to another key of the KV
// between requests, so that memtables fill and Pebble flushes them and
// rotates its write-ahead log, as a witness of many logs would. Every request
// from the first refused on is a 500 naming nothing, the KV says why
// (wrapping ErrFailed and fault), nothing cosigned is ahead of what
// reopening the store finds, and the reopened witness goes on.
func cosignThrough(t *testing.T, faults *errorfs.Toggle, fill bool, fault error) {
	dir := t.TempDir()
	kv, err := open(dir, errorfs.Wrap(vfs.Default, faults), nil)
	if err != nil {
		t.Fatal(err)
	}
	const origin, max = "log.example/a", 400
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "a")
	l.Grow(t, max+3)
	srv := httptest.NewServer(newWitness(t, kv, k))
	defer srv.Close()
	var cosigned []uint64
	post := func(old, size uint64) int {
		t.Helper()
		s := postCheckpoint(t, srv.URL, l, old, size)
		if s == http.StatusOK {
			cosigned = append(cosigned, size)
		}
		return s
	}
	if s := post(0, 1); s != 200 {
		t.Fatalf("before the fault: %d", s)
	}
	faults.On()
	last, size, status := uint64(1), uint64(2), 0
	var filled []byte
	for ; size <= max; size++ {
		if fill {
			v := make([]byte, 60<<10)
			rand.Read(v)
			if err := kv.CompareAndSwap([]byte("filler"), filled, v); err == nil {
				filled = v
			}
		}
		if status = post(last, size); status != http.StatusOK {
			break
		}
		last = size
	}
	if size > max {
		t.Fatalf("the witness cosigned up to %d with the fault on", max)
	}
	if status != http.StatusInternalServerError {
		t.Errorf("the request of size %d, whose write failed: %d, want 500", size, status)
	}
	// What a log's client does next: retry, learn a size from a 409, ask
	// from it.
	for _, r := range [][2]uint64{{last, size}, {size, size}, {size, size + 1}, {size + 1, size + 1}} {
		if s := post(r[0], r[1]); s != http.StatusInternalServerError {
			t.Errorf("old %d, size %d after the fault: %d, want 500", r[0], r[1], s)
		}
	}
	if _, err := kv.Get([]byte("x")); !errors.Is(err, ErrFailed) || !errors.Is(err, fault) {
		t.Errorf("Get after the fault: %v, want ErrFailed naming %v", err, fault)
	}
	faults.Off()
	for _, old := range []uint64{last, size, size + 1, size + 2} {
		if s := post(old, size+2); s != http.StatusInternalServerError {
			t.Errorf("old %d, size %d with the disk healed, before a restart: %d, want 500", old, size+2, s)
		}
	}
	srv.Close()
	kv.Close()

	kv, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	rec, err := witness.KVStore(kv).Latest(context.Background(), origin)
	if err != nil {
		t.Fatal(err)
	}
	c, err := log.ParseCheckpointNote(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cosigned {
		if s > c.Size {
			t.Errorf("the witness cosigned size %d; reopened, its store holds size %d", s, c.Size)
		}
	}
	srv = httptest.NewServer(newWitness(t, kv, k))
	defer srv.Close()
	if s := postCheckpoint(t, srv.URL, l, c.Size, size+3); s != http.StatusOK {
		t.Errorf("reopened at size %d, asked from it to %d: %d, want 200", c.Size, size+3, s)
	}
}

// newWitness returns a witness of the log k signs, keeping its state in kv.
func newWitness(t *testing.T, kv *KV, k witnesstest.Key) *server.Witness {
	t.Helper()
	w, err := server.New(server.Options{Signer: witnesstest.NewCosigner(t, "witness.example/w"), Store: witness.KVStore(kv),
		Logs: []server.Log{{Origin: k.Verifier.Name(), Verifiers: []note.Verifier{k.Verifier}}}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// postCheckpoint asks the witness at url to cosign l's checkpoint of
// size from old. It returns the status, 0 if the connection broke.
func postCheckpoint(t *testing.T, url string, l *witnesstest.Log, old, size uint64) int {
	t.Helper()
	req := &witness.AddCheckpointRequest{OldSize: old, Checkpoint: l.Checkpoint(t, size)}
	if old > 0 && old < size {
		var err error
		if req.Proof, err = log.ProveConsistency(context.Background(), l.Store, old, size); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(req.String()))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
