package witness

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// FuzzParseEvidence: fork evidence is a file anyone may hand to
// `provlog-witness verify-fork`; ParseEvidence and Verify never panic on
// it, and what ParseEvidence accepts survives Marshal and parses again
// to the same evidence.
func FuzzParseEvidence(f *testing.F) {
	skey, vkey, _ := note.GenerateKey(rand.Reader, "log.example/forked")
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	a, b := refTree("a", 10), refTree("b", 20)
	small, large := signF(f, s, 10, a.Hash()), signF(f, s, 20, b.Hash())
	p, err := b.ConsistencyProof(10, 20)
	if err != nil {
		f.Fatal(err)
	}
	ev := ForkFromProof(small, large, p)
	if ev == nil {
		f.Fatal("ForkFromProof found no fork")
	}
	f.Add(ev.Marshal())
	f.Add([]byte(`{"kind":"fork","origin":"o","checkpoints":["",""],"proof":["AA=="],"found":"2026-01-01T00:00:00Z","detail":""}`))
	f.Add([]byte(`{"checkpoints":["a","b","c"]}`))
	f.Add([]byte(`{"found":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEvidence(b)
		if err != nil {
			return
		}
		e.Verify(v)
		back, err := ParseEvidence(e.Marshal())
		if err != nil {
			t.Fatalf("Marshal of accepted evidence does not parse: %v", err)
		}
		if x, y := e.Marshal(), back.Marshal(); string(x) != string(y) {
			t.Fatalf("evidence changed in a round trip:\n%s\n%s", x, y)
		}
	})
}

// TestParseEvidenceLinear: evidence with 256, 512, 1024 and 2048 proof
// lines (and a detail as long): each doubling at most doubles the
// allocations and bytes allocated of ParseEvidence and Verify (counts,
// not time).
func TestParseEvidenceLinear(t *testing.T) {
	skey, vkey, _ := note.GenerateKey(rand.Reader, "log.example/forked")
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	a, b := refTree("a", 10), refTree("b", 20)
	small, large := sign(t, s, 10, a.Hash()), sign(t, s, 20, b.Hash())
	h := base64.StdEncoding.EncodeToString(b.HashAt(10))
	var prevA, prevB float64
	for _, n := range []int{256, 512, 1024, 2048} {
		e := Evidence{Kind: "fork", Origin: s.Name(), Checkpoints: [2]string{string(small), string(large)},
			RootAtSmallerSize: h, Detail: strings.Repeat("d", 64*n)}
		for range n {
			e.Proof = append(e.Proof, h)
		}
		in, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		allocs, bytes := allocated(10, func() {
			got, err := ParseEvidence(in)
			if err != nil {
				t.Fatal(err)
			}
			if got.Verify(v) == nil {
				t.Fatal("a bogus proof verified")
			}
		})
		if prevA > 0 && (allocs > 2*prevA+8 || bytes > 2.2*prevB+1024) {
			t.Errorf("%d proof lines: %.0f allocations, %.0f bytes; half as many: %.0f, %.0f: want at most double", n, allocs, bytes, prevA, prevB)
		}
		prevA, prevB = allocs, bytes
	}
}

// signF is sign for a fuzz target's setup.
func signF(f *testing.F, s note.Signer, size uint64, root []byte) []byte {
	c := log.Checkpoint{Origin: s.Name(), Size: size, Hash: root}
	msg, err := note.Sign(&note.Note{Text: c.String()}, s)
	if err != nil {
		f.Fatal(err)
	}
	return msg
}

// allocated returns the allocations and the bytes allocated by one run of
// f (the mean of runs runs).
func allocated(runs int, f func()) (allocs, bytes float64) {
	f()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&b)
	return float64(b.Mallocs-a.Mallocs) / float64(runs), float64(b.TotalAlloc-a.TotalAlloc) / float64(runs)
}
