package log

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
)

// TestNodeHashIsRFC6962: NodeHash is the merkle module's RFC 6962 node
// hash, for hashes of the log's size and for any other.
func TestNodeHashIsRFC6962(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		n, m := HashSize, HashSize
		if i%10 == 0 {
			n, m = r.IntN(70), r.IntN(70)
		}
		l, rr := make([]byte, n), make([]byte, m)
		for j := range l {
			l[j] = byte(r.Uint32())
		}
		for j := range rr {
			rr[j] = byte(r.Uint32())
		}
		if got, want := NodeHash(l, rr), rfc6962.DefaultHasher.HashChildren(l, rr); !bytes.Equal(got, want) {
			t.Fatalf("NodeHash(%x, %x) = %x, want %x", l, rr, got, want)
		}
	}
}

// TestLeafHashIsRFC6962: LeafHash is the merkle module's RFC 6962 leaf
// hash.
func TestLeafHashIsRFC6962(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		e := make([]byte, r.IntN(3000))
		for j := range e {
			e[j] = byte(r.Uint32())
		}
		if got, want := LeafHash(e), rfc6962.DefaultHasher.HashLeaf(e); !bytes.Equal(got, want) {
			t.Fatalf("LeafHash(%x) = %x, want %x", e, got, want)
		}
	}
}

// BenchmarkLeafHash hashes an entry of a 1 KiB echo's call's size.
func BenchmarkLeafHash(b *testing.B) {
	e := bytes.Repeat([]byte("x"), 1500)
	b.ReportAllocs()
	for b.Loop() {
		LeafHash(e)
	}
}
