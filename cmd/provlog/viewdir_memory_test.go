package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/provlog/provlog/log/bundle"
)

// TestViewBundleMemory: provlog view of a bundle holds what the page
// needs of its entries, not the entries: an index into provenance.jsonl
// (where each entry starts, its leaf hash) and the tree's nodes, reading
// an entry from the file when it is asked for, as the bundle checker's
// bundle.Entries does. Before, it read provenance.jsonl whole and kept
// every line, a map of leaf hashes and the tree as slices: 4,000 entries
// of a real log held 564 bytes each (1.7 times the file; a forged
// 66 MB file of 200,000 entries, 171 MB peak RSS); now at most 160.
// Counted as heap held after a collection, not time.
func TestViewBundleMemory(t *testing.T) {
	const n = 4000
	dir := exportBundle(t, makeDataDir(t, n), "")
	fi, err := os.Stat(filepath.Join(dir, bundle.EntriesFile))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := openView(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	perEntry := held / (n + 1)
	t.Logf("%s of %d bytes, %d entries: the view holds %d bytes (%d an entry)", bundle.EntriesFile, fi.Size(), n+1, held, perEntry)
	if perEntry > 160 {
		t.Errorf("the view of a bundle of %d entries (%s of %d bytes) holds %d bytes, %d an entry; want at most 160 an entry", n+1, bundle.EntriesFile, fi.Size(), held, perEntry)
	}
}
