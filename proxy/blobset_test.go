package proxy

import (
	"bytes"
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
