package evidence

import (
	"strings"
	"testing"
)

// TestWriterStopsAtVerifyBound: the writer refuses a file that would take
// the directory past what Verify reads (maxDirBytes), naming it; it wrote
// such a directory, which then failed its own verification.
func TestWriterStopsAtVerifyBound(t *testing.T) {
	w := &writer{dir: t.TempDir(), files: map[string]string{}}
	half := make([]byte, maxDirBytes/2)
	w.put("context/1.json", half)
	w.put("context/2.json", half)
	if w.err != nil {
		t.Fatalf("exactly maxDirBytes: %v", w.err)
	}
	w.put("context/3.json", []byte("{}"))
	if w.err == nil || !strings.Contains(w.err.Error(), "context/3.json") {
		t.Errorf("a file past maxDirBytes: err = %v, want one naming it", w.err)
	}
	if _, ok := w.files["context/3.json"]; ok {
		t.Error("the file past the bound was listed")
	}
}
