package cose

import (
	"bytes"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// FuzzParse: Parse never panics; what it accepts is well-formed CBOR to
// fxamacker/cbor too, has exactly one byte form (Marshal gives the input
// back), and Verify on it does not panic.
func FuzzParse(f *testing.F) {
	s, k, _ := testKeys(f)
	for _, size := range []int{1, 2, 9, 300} {
		tr := tree(size)
		p, _ := tr.InclusionProof(uint64(size-1), uint64(size))
		b, err := Sign(s, uint64(size), uint64(size-1), tr.LeafHash(uint64(size-1)), p, tr.Hash())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xd2, 0x84})
	f.Add([]byte{0xd2, 0x9f, 0xff})
	leaf := tree(1).LeafHash(0)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if !bytes.Equal(r.Marshal(), b) {
			t.Fatalf("accepted a second spelling: %x", b)
		}
		if err := cbor.Wellformed(b); err != nil {
			t.Fatalf("accepted CBOR fxamacker finds malformed (%v): %x", err, b)
		}
		r.Verify(leaf, k)
	})
}
