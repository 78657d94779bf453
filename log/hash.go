package log

import (
	"crypto/sha256"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of every hash in the log (SHA-256).
const HashSize = sha256.Size

// LeafHash returns the RFC 6962 leaf hash of an entry: SHA-256(0x00 || entry).
// The digest stays on the stack (rfc6962's HashLeaf, through its hasher's
// interface, allocated it and its prefix): the result is the one
// allocation, for the two entries of every call.
func LeafHash(entry []byte) []byte {
	h := sha256.New()
	h.Write([]byte{rfc6962.RFC6962LeafHashPrefix})
	h.Write(entry)
	return h.Sum(make([]byte, 0, HashSize))
}

// NodeHash returns the RFC 6962 interior node hash SHA-256(0x01 || l || r).
// Two hashes of the log's size are hashed from the stack: the result is
// the one allocation (every commit makes a few dozen of these).
func NodeHash(l, r []byte) []byte {
	if len(l) != HashSize || len(r) != HashSize {
		return rfc6962.DefaultHasher.HashChildren(l, r)
	}
	var b [1 + 2*HashSize]byte
	b[0] = rfc6962.RFC6962NodeHashPrefix
	copy(b[1:], l)
	copy(b[1+HashSize:], r)
	h := sha256.Sum256(b[:])
	return h[:]
}

// EmptyRoot is the root hash of the empty tree, SHA-256 of no bytes.
func EmptyRoot() []byte { return rfc6962.DefaultHasher.EmptyRoot() }

// RangeRoot returns the root hash of the tree of this size whose compact
// range (the hashes of compact.RangeNodes(0, size), left to right) is rng,
// or nil if rng does not fit the size.
func RangeRoot(size uint64, rng [][]byte) []byte {
	if size == 0 {
		return EmptyRoot()
	}
	r, err := (&compact.RangeFactory{Hash: NodeHash}).NewRange(0, size, rng)
	if err != nil {
		return nil
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return nil
	}
	return root
}
