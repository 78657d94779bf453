package witness

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

func refTree(prefix string, n int) *testonly.Tree {
	t := testonly.New(rfc6962.DefaultHasher)
	for i := range n {
		t.AppendData(fmt.Appendf(nil, "%s %d", prefix, i))
	}
	return t
}

// TestConsistencyRoots checks the RFC 9162 root computation against the
// reference tree: a valid proof leads to both roots.
func TestConsistencyRoots(t *testing.T) {
	tree := refTree("leaf", 70)
	for n := uint64(1); n <= 70; n++ {
		for m := uint64(1); m < n; m++ {
			p, err := tree.ConsistencyProof(m, n)
			if err != nil {
				t.Fatal(err)
			}
			old, new, ok := consistencyRoots(m, n, p)
			if m&(m-1) == 0 {
				if ok {
					t.Fatalf("consistencyRoots(%d, %d) reported roots for a power-of-two old size", m, n)
				}
				continue
			}
			if !ok {
				t.Fatalf("consistencyRoots(%d, %d) failed", m, n)
			}
			if !bytes.Equal(old, tree.HashAt(m)) || !bytes.Equal(new, tree.HashAt(n)) {
				t.Fatalf("consistencyRoots(%d, %d) gave other roots", m, n)
			}
			// A proof one hash short or long does not parse.
			if _, _, ok := consistencyRoots(m, n, p[:len(p)-1]); ok && len(p) > 1 {
				t.Fatalf("consistencyRoots(%d, %d) accepted a short proof", m, n)
			}
			if _, _, ok := consistencyRoots(m, n, append(p, p[0])); ok {
				t.Fatalf("consistencyRoots(%d, %d) accepted a long proof", m, n)
			}
		}
	}
}

func sign(t *testing.T, s note.Signer, size uint64, root []byte) []byte {
	t.Helper()
	c := log.Checkpoint{Origin: s.Name(), Size: size, Hash: root}
	msg, err := note.Sign(&note.Note{Text: c.String()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestForkFromProof builds the misbehaving log: one key signs two trees
// that share no entries. The consistency proof taken from the larger tree
// shows the fork; the evidence survives JSON and verifies with nothing but
// the log's key; any change to it fails.
func TestForkFromProof(t *testing.T) {
	skey, vkey, _ := note.GenerateKey(rand.Reader, "log.example/forked")
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	a, b := refTree("a", 10), refTree("b", 20)
	small, large := sign(t, s, 10, a.Hash()), sign(t, s, 20, b.Hash())
	p, err := b.ConsistencyProof(10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if log.VerifyConsistency(10, 20, p, a.Hash(), b.Hash()) == nil {
		t.Fatal("the forked trees are consistent; the test is wrong")
	}
	ev := ForkFromProof(small, large, p)
	if ev == nil {
		t.Fatal("ForkFromProof found no fork")
	}
	if err := ev.Verify(v); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	back, err := ParseEvidence(ev.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(v); err != nil {
		t.Fatalf("Verify after a JSON round trip: %v", err)
	}
	if ev.RootAtSmallerSize != base64.StdEncoding.EncodeToString(b.HashAt(10)) {
		t.Error("RootAtSmallerSize is not the larger tree's root at the smaller size")
	}

	// Same size, other root.
	same := ForkFromProof(small, sign(t, s, 10, refTree("c", 10).Hash()), nil)
	if same == nil || same.Verify(v) != nil {
		t.Fatalf("same-size fork: %+v", same)
	}

	// Tampered evidence fails.
	_, otherV, _ := note.GenerateKey(rand.Reader, "log.example/forked")
	ov, _ := note.NewVerifier(otherV)
	for _, tc := range []struct {
		why    string
		change func(e *Evidence)
		v      note.Verifier
	}{
		{"another key", func(*Evidence) {}, ov},
		{"root at smaller size is the smaller root", func(e *Evidence) { e.RootAtSmallerSize = base64.StdEncoding.EncodeToString(a.Hash()) }, v},
		{"wrong proof", func(e *Evidence) { e.Proof[0] = e.Proof[1] }, v},
		{"no proof", func(e *Evidence) { e.Proof = nil }, v},
		{"swapped", func(e *Evidence) { e.Checkpoints[0], e.Checkpoints[1] = e.Checkpoints[1], e.Checkpoints[0] }, v},
		{"consistent pair", func(e *Evidence) {
			e.Checkpoints[0] = string(sign(t, s, 10, b.HashAt(10)))
			e.RootAtSmallerSize = base64.StdEncoding.EncodeToString(b.HashAt(10))
		}, v},
		{"unsigned", func(e *Evidence) { e.Checkpoints[1] = strings.SplitAfter(e.Checkpoints[1], "\n\n")[0] }, v},
		{"another origin", func(e *Evidence) { e.Origin = "log.example/other" }, v},
		{"no origin", func(e *Evidence) { e.Origin = "" }, v},
	} {
		e, _ := ParseEvidence(ev.Marshal())
		tc.change(e)
		if err := e.Verify(tc.v); err == nil {
			t.Errorf("%s: Verify succeeded", tc.why)
		}
	}

	// Nothing to show: consistent checkpoints, a bogus proof, and a
	// power-of-two old size.
	if ForkFromProof(sign(t, s, 10, b.HashAt(10)), large, p) != nil {
		t.Error("ForkFromProof found a fork between consistent checkpoints")
	}
	if ForkFromProof(small, large, [][]byte{p[0], p[0], p[0]}) != nil {
		t.Error("ForkFromProof took a bogus proof as evidence")
	}
	p8, _ := b.ConsistencyProof(8, 20)
	if ForkFromProof(sign(t, s, 8, a.HashAt(8)), large, p8) != nil {
		t.Error("ForkFromProof claimed a fork from a power-of-two size")
	}
}
