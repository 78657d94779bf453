package bundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/provlog/provlog/log"
)

// FuzzIndexEntries hands IndexEntries untrusted bytes for
// provenance.jsonl. It never panics; what it indexes is the file's lines,
// each read back as written, each found by its leaf hash (the last of
// equal lines), and nothing else.
func FuzzIndexEntries(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), uint64(0))
	f.Add([]byte("x\n\nx\n"), uint64(7))
	f.Add([]byte("no newline"), uint64(0))
	f.Add([]byte(""), uint64(3))
	f.Add(bytes.Repeat([]byte("y"), entryLineBytes+1), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, from uint64) {
		from %= 1 << 40
		p := filepath.Join(t.TempDir(), EntriesFile)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		es, err := IndexEntries(fh, from)
		lines := bytes.SplitAfter(b, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if err != nil {
			if len(b) > 0 && b[len(b)-1] == '\n' && bytes.IndexByte(b, '\n') < entryLineBytes && len(b) < entryLineBytes {
				t.Fatalf("%q refused: %v", b, err)
			}
			return
		}
		defer es.Close()
		if es.From() != from || es.End()-es.From() != uint64(len(lines)) {
			t.Fatalf("%q: indexed [%d, %d), want %d lines from %d", b, es.From(), es.End(), len(lines), from)
		}
		for k, l := range lines {
			i := from + uint64(k)
			got, err := es.Entries(context.Background(), i, i+1)
			want := bytes.TrimSuffix(l, []byte("\n"))
			if err != nil || !bytes.Equal(got[0], want) {
				t.Fatalf("entry %d: %q, %v; want %q", i, got, err, want)
			}
			j, ok := es.Find(log.LeafHash(want))
			if !ok || j < i {
				t.Fatalf("entry %d: Find gives %d, %v", i, j, ok)
			}
		}
	})
}
