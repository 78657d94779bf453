package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/provlog/provlog/anchor/evidence"
	"github.com/provlog/provlog/log/bundle"
)

// TestViewEvidenceSparseWork: an evidence holds a handful of entries,
// but its manifest can name any index below its checkpoint's size, and
// that size is not signed where the view reads it. A forger adds a
// context entry at index 2^24-1 and raises the size to 2^24: the view
// must do the work of the entries the directory holds, not of the
// indices it names. Counted in allocations (no clock): opening the
// forged evidence may cost what opening the genuine one costs and a
// little more for its one more entry, not a replay of 2^24 placeholder
// entries (2^30-1 took 94 s before the page's URL appeared).
func TestViewEvidenceSparseWork(t *testing.T) {
	data := makeDataDir(t, 3)
	genuine := filepath.Join(t.TempDir(), "ev")
	if o, code := runCmd(t, "evidence", "--data", data, "--index", "1", "--out", genuine); code != 0 {
		t.Fatalf("evidence: %s", o)
	}
	const far = uint64(1)<<24 - 1
	forged := filepath.Join(t.TempDir(), "forged")
	if err := os.CopyFS(forged, os.DirFS(genuine)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	mb, err := os.ReadFile(filepath.Join(forged, evidence.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	ctxs, _ := m["context"].([]any)
	m["context"] = append(ctxs, map[string]any{"index": far})
	mb, _ = json.Marshal(m)
	writeFile(t, filepath.Join(forged, evidence.ManifestFile), mb)
	name := filepath.Join(forged, evidence.ContextDir, fmt.Sprint(far))
	os.MkdirAll(filepath.Dir(name), 0o700)
	for src, ext := range map[string]string{evidence.EntryFile: ".json", evidence.ReceiptFile: ".tlog-proof"} {
		b, err := os.ReadFile(filepath.Join(forged, src))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, name+ext, b)
	}
	cpPath := filepath.Join(forged, bundle.CheckpointFile)
	cp, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cpPath, regexp.MustCompile(`(?m)^4$`).ReplaceAll(cp, []byte(fmt.Sprint(far+1))))

	mallocs := func(dir string) (*view, uint64) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v, err := openView(context.Background(), dir)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("opening %s: %v", filepath.Base(dir), err)
		}
		return v, after.Mallocs - before.Mallocs
	}
	_, g := mallocs(genuine)
	v, f := mallocs(forged)
	if v.size != far+1 || v.tasks == nil {
		t.Fatalf("forged evidence: size %d, tasks %v (%q); want %d and a task history", v.size, v.tasks, v.noTasks, far+1)
	}
	// One more entry, its receipt and its file names: a few hundred.
	t.Logf("allocations: genuine %d, forged %d", g, f)
	if f > g+5000 {
		t.Errorf("opening an evidence of %d entries naming entry %d: %d allocations, the genuine evidence %d; want the work to follow the entries held", len(v.given), far, f, g)
	}
}
