package evidence

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// FuzzParseConsistency: the consistency file's parser never panics, and
// what it accepts has one text form.
func FuzzParseConsistency(f *testing.F) {
	f.Add([]byte(ConsistencyHeader + "\nold 3\nnew 7\n" + strings.Repeat("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", 3)))
	f.Add([]byte(ConsistencyHeader + "\nold 0\nnew 0\n"))
	f.Add([]byte("old 1\nnew\n"))
	f.Add([]byte(ConsistencyHeader + "\nold 3\nnew 7\n" + strings.Repeat("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", maxProofLines+1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		old, new, p, err := parseConsistency(b)
		if err != nil {
			return
		}
		if old > new || len(p) > maxProofLines {
			t.Fatalf("accepted old %d > new %d, or %d proof lines", old, new, len(p))
		}
		// Verify requires the one text form; it must be reachable.
		if again, _, _, err := parseConsistency([]byte(formatConsistency(old, new, p))); err != nil || again != old {
			t.Fatalf("re-encoding does not parse: %v", err)
		}
	})
}

// FuzzWitnesses: witnesses.txt and a checkpoint of any bytes give
// problems, never a panic.
func FuzzWitnesses(f *testing.F) {
	_, vkey, err := note.GenerateKey(nil, "provlog.test/fuzz")
	if err != nil {
		f.Fatal(err)
	}
	v, _ := note.NewVerifier(vkey)
	_, wkey, _ := log.GenerateCosignerKey(nil, "witness.test/w")
	f.Add("threshold 1\n"+wkey+"\n", "provlog.test/fuzz\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\u2014 x AAAA\n")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, witnesses, cp string) {
		c := &checker{files: map[string][]byte{WitnessesFile: []byte(witnesses)}, used: map[string]bool{}, rep: &Report{}, v: v}
		c.checkWitnesses([]byte(cp))
	})
}

// FuzzSkipped: skipped/ files of any bytes give problems, never a panic.
func FuzzSkipped(f *testing.F) {
	_, vkey, err := note.GenerateKey(nil, "provlog.test/fuzz")
	if err != nil {
		f.Fatal(err)
	}
	v, _ := note.NewVerifier(vkey)
	f.Add([]byte(`{"v":1,"checkpoint":"provlog.test/fuzz\n2\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n","size":2,"timestamps":[],"tlogs":[]}`),
		[]byte(`{"kind":"call","time":"2026-01-01T00:00:00.000000000Z","actor":"a"}`),
		[]byte("c2sp.org/tlog-proof@v1\nindex 1\n\nprovlog.test/fuzz\n2\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"))
	f.Add([]byte(""), []byte(""), []byte(""))
	f.Fuzz(func(t *testing.T, rec, entry, proof []byte) {
		c := &checker{ctx: context.Background(), files: map[string][]byte{SkippedAnchorFile: rec, SkippedEntryFile: entry, SkippedProofFile: proof},
			used: map[string]bool{}, rep: &Report{Manifest: &Manifest{Index: 1}}, v: v}
		c.checkSkipped(nil)
		if c.skippedWhy != "" && len(c.probs) == 0 {
			t.Fatalf("unsigned skipped/ files accepted: %s", c.skippedWhy)
		}
	})
}
