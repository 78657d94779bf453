package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/provlog/provlog/log/blobs"
)

// TestBlobSetPurgeShared: two calls keep one identical result, so both
// put one blob; the first wrote it, the second found it there. The first
// call's append fails and its cleanup (blobSet.purge) runs while the
// second call's entry, naming the blob, is on its way (its hold open) or
// committed: the blob stays. Before, the cleanup deleted it: the second
// call's entry named a payload gone without a purge entry.
func TestBlobSetPurgeShared(t *testing.T) {
	st, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{opts: Options{Blobs: st}, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	data := bytes.Repeat([]byte("one result, two calls "), 100)
	var failed, kept blobSet
	if err := failed.put(st, data); err != nil {
		t.Fatal(err)
	}
	if err := kept.put(st, data); err != nil {
		t.Fatal(err)
	}
	failed.purge(p) // its append failed
	kept.done()     // its entry is in the log
	if ok, err := st.Has(blobs.Sum(data)); !ok || err != nil {
		t.Fatalf("the blob the second call's entry names was deleted by the first call's cleanup (has %v, %v)", ok, err)
	}
	// Alone, a failed call's blob is still cleaned up.
	alone := []byte("only the failed call's")
	var solo blobSet
	if err := solo.put(st, alone); err != nil {
		t.Fatal(err)
	}
	solo.purge(p)
	if ok, err := st.Has(blobs.Sum(alone)); ok || err != nil {
		t.Fatalf("the blob only a failed call wrote is still there (has %v, %v)", ok, err)
	}
}

// sharedBackend is one blob store as several processes see it, each
// through a Store of its own (holds are a Store's): a shared log's blob
// table. It says it is shared.
type sharedBackend struct{ *blobs.Store }

func (s sharedBackend) ReadBlob(name string) ([]byte, error) { return s.Get(name) }
func (s sharedBackend) WriteBlob(_ string, data []byte) error {
	_, err := s.Put(data)
	return err
}
func (s sharedBackend) DeleteBlob(name string) error      { return s.Purge(name) }
func (s sharedBackend) HasBlob(name string) (bool, error) { return s.Has(name) }
func (s sharedBackend) Shared() bool                      { return true }

// TestBlobSetPurgeSharedStore: TestBlobSetPurgeShared across two
// sidecars of a shared log, each with its own Store over the log's blob
// table: the first's call wrote the blob and its append failed; the
// second's found it there, and its entry is in the log (its check, that
// the blob is still there, done). The first's cleanup must not delete
// it: no hold of the second's is visible to it. Before, it did.
func TestBlobSetPurgeSharedStore(t *testing.T) {
	base, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st1, st2 := blobs.New(sharedBackend{base}), blobs.New(sharedBackend{base})
	p1, p2 := &Proxy{opts: Options{Blobs: st1}, logger: quiet}, &Proxy{opts: Options{Blobs: st2}, logger: quiet}
	data := bytes.Repeat([]byte("one result, two sidecars "), 100)
	var failed, kept blobSet
	if err := failed.put(st1, data); err != nil {
		t.Fatal(err)
	}
	if err := kept.put(st2, data); err != nil {
		t.Fatal(err)
	}
	kept.named(p2, 0) // its entry is in the log
	failed.purge(p1)
	if ok, err := base.Has(blobs.Sum(data)); !ok || err != nil {
		t.Fatalf("the blob the second sidecar's entry names was deleted by the first's cleanup (has %v, %v)", ok, err)
	}
}

// TestBlobSetNamedAfterPurge: on a shared log a call through sidecar B
// holds blob X and its entry (index 4) is in; then sidecar A's erasure
// writes its purge entry (5, naming X) and deletes X; then B's check that
// X is still there runs. X must stay gone: the purge entry is newer than
// every entry naming X, and audit reports X still there as a purge that
// did not finish (an erasure the log says was done, and was not). B
// stored it again. When the purge entry is older than B's entry (3), B's
// entry keeps X, and X is stored again as before.
func TestBlobSetNamedAfterPurge(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		purgeEntry uint64
		want       bool
	}{{5, false}, {3, true}} {
		base, err := blobs.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		st := blobs.New(sharedBackend{base})
		data := bytes.Repeat([]byte("an erased payload "), 100)
		sum := blobs.Sum(data)
		// The log as B's sidecar reads it: the purge entry names sum.
		named := func(_ context.Context, s string, entry uint64) (bool, error) {
			return s != sum || tc.purgeEntry < entry, nil
		}
		p := &Proxy{opts: Options{Blobs: st, BlobNamed: named}, logger: quiet}
		var kept blobSet
		if err := kept.put(st, data); err != nil {
			t.Fatal(err)
		}
		if err := base.Purge(sum); err != nil { // A's purge, after its entry
			t.Fatal(err)
		}
		kept.named(p, 4) // B's entry 4 names the blob
		if ok, err := base.Has(sum); ok != tc.want || err != nil {
			t.Errorf("purge entry %d, B's entry 4: the blob is there: %v (%v), want %v", tc.purgeEntry, ok, err, tc.want)
		}
	}
}
