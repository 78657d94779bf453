package witnesspebble

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness"
	"github.com/provlog/provlog/witness/server"
	"github.com/provlog/provlog/witness/witnesstest"
)

// walFaults fails every write and sync of Pebble's write-ahead log while
// it is on.
func walFaults() *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync) {
			return errorfs.ErrInjected
		}
		return nil
	})}
}

// TestWriteFaultCosignsNothingUndurable runs a witness over HTTP on a KV
// whose write-ahead log fails while a checkpoint is recorded, and then
// heals. Pebble applies a batch to its memtable before the failed sync
// reports, so the failed record is readable though not durable: the
// witness read it back, answered 409 naming it, and cosigned it (and
// checkpoints built on it) when asked from that size, while the disk
// still held the old one. Now every request after the fault gets a 500,
// and nothing cosigned is ahead of what reopening the store finds.
func TestWriteFaultCosignsNothingUndurable(t *testing.T) {
	dir := t.TempDir()
	faults := walFaults()
	kv, err := open(dir, errorfs.Wrap(vfs.Default, faults))
	if err != nil {
		t.Fatal(err)
	}
	const origin = "log.example/a"
	k := witnesstest.NewKey(t, origin)
	l := witnesstest.NewLog(t, k, "a")
	w, err := server.New(server.Options{Signer: witnesstest.NewCosigner(t, "witness.example/w"), Store: witness.KVStore(kv),
		Logs: []server.Log{{Origin: origin, Verifiers: []note.Verifier{k.Verifier}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	defer srv.Close()
	l.Grow(t, 12)
	var cosigned []uint64
	post := func(old, size uint64) int {
		t.Helper()
		var p [][]byte
		if old > 0 && old < size {
			if p, err = log.ProveConsistency(context.Background(), l.Store, old, size); err != nil {
				t.Fatal(err)
			}
		}
		body := (&witness.AddCheckpointRequest{OldSize: old, Proof: p, Checkpoint: l.Checkpoint(t, size)}).String()
		resp, err := http.Post(srv.URL+"/add-checkpoint", "text/plain", strings.NewReader(body))
		if err != nil {
			return 0 // the connection broke
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusOK {
			cosigned = append(cosigned, size)
		}
		return resp.StatusCode
	}
	if s := post(0, 5); s != 200 {
		t.Fatalf("before the fault: %d", s)
	}
	faults.On()
	if s := post(5, 8); s != http.StatusInternalServerError {
		t.Errorf("the request whose write failed: %d, want 500", s)
	}
	// What a log's client does next: retry, learn a size from a 409, ask
	// from it.
	for _, r := range [][2]uint64{{5, 8}, {8, 8}, {8, 9}, {9, 9}} {
		if s := post(r[0], r[1]); s != http.StatusInternalServerError {
			t.Errorf("old %d, size %d after the fault: %d, want 500", r[0], r[1], s)
		}
	}
	faults.Off()
	for _, r := range [][2]uint64{{5, 10}, {8, 10}, {9, 10}, {10, 10}} {
		if s := post(r[0], r[1]); s != http.StatusInternalServerError {
			t.Errorf("old %d, size %d with the disk healed, before a restart: %d, want 500", r[0], r[1], s)
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
}
