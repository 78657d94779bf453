package hot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
)

// TestMin holds Min to its definition, counted level by level.
func TestMin(t *testing.T) {
	want := func(size, max uint64) uint {
		if max == 0 {
			return 64
		}
		for l := uint(0); l < 64; l++ {
			if l >= 1 && l <= derived {
				continue // the lowest kept level is stored
			}
			var n uint64
			for k := l; k < 64; k++ {
				if l == 0 && k >= 1 && k <= derived {
					continue // hashed from the leaves
				}
				n += size >> k
			}
			if n <= max {
				return l
			}
		}
		return 64
	}
	for _, size := range []uint64{0, 1, 2, 3, 7, 8, 40, 41, 1000, 65535, 65536, 1 << 20, 1<<20 + 12345, 1<<40 - 1} {
		for _, max := range []uint64{0, 1, 2, 8, 40, 1 << 17, 1 << 21} {
			if got := Min(size, max); got != want(size, max) {
				t.Errorf("Min(%d, %d) = %d, want %d", size, max, got, want(size, max))
			}
		}
	}
}

// hashOf is the hash of node id in one tree: leaf i's hash is SHA-256 of
// i, an interior node's the RFC 6962 hash of its children.
func hashOf(id compact.NodeID) []byte {
	if id.Level > 0 {
		return log.NodeHash(hashOf(compact.NewNodeID(id.Level-1, 2*id.Index)), hashOf(compact.NewNodeID(id.Level-1, 2*id.Index+1)))
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id.Index)
	h := sha256.Sum256(b[:])
	return h[:]
}

// storedNodes counts the hashes h keeps in memory.
func storedNodes(h *Nodes) uint64 {
	var n uint64
	for _, v := range h.levels {
		n += v.n
	}
	return n
}

// nodesOf returns every node completed in growing a tree from old to size
// leaves, each level's in index order.
func nodesOf(old, size uint64) []log.Node {
	var out []log.Node
	for lvl := uint(0); size>>lvl > 0; lvl++ {
		for i := old >> lvl; i < size>>lvl; i++ {
			id := compact.NewNodeID(lvl, i)
			out = append(out, log.Node{ID: id, Hash: hashOf(id)})
		}
	}
	return out
}

// TestWithAndLoad grows a tree batch by batch and checks, at each size, that
// what With holds and what Load builds from a store agree with the store
// and with each other, and that nothing is held beyond max.
func TestWithAndLoad(t *testing.T) {
	for _, max := range []uint64{0, 1, 8, 40, 1 << 10} {
		h := Empty(max)
		var size uint64
		for _, step := range []uint64{1, 1, 2, 5, 9, 17, 3, 64, 100} {
			h = h.With(size+step, nodesOf(size, size+step))
			size += step
			loaded, err := Load(size, max, func(lvl uint, count uint64, put func([]byte)) error {
				for i := range count {
					put(hashOf(compact.NewNodeID(lvl, i)))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for lvl := uint(0); size>>lvl > 0; lvl++ {
				for i := range size >> lvl {
					id := compact.NewNodeID(lvl, i)
					a, b := make([]byte, hashSize), make([]byte, hashSize)
					okA, okB := h.Read(id, a), loaded.Read(id, b)
					if okA != okB || !bytes.Equal(a, b) {
						t.Fatalf("max %d size %d node %v: With holds %v, Load %v", max, size, id, okA, okB)
					}
					if okA {
						if !bytes.Equal(a, hashOf(id)) {
							t.Fatalf("max %d size %d node %v: wrong hash", max, size, id)
						}
					}
					if want := lvl >= Min(size, max); okA != want {
						t.Fatalf("max %d size %d node %v: held %v, want %v", max, size, id, okA, want)
					}
				}
			}
			if n := storedNodes(h); n > max || n != storedNodes(loaded) || n != stored(size, Min(size, max)) {
				t.Fatalf("max %d size %d: %d nodes kept (Load: %d)", max, size, n, storedNodes(loaded))
			}
		}
	}
}

// TestLoadGap: a level the store holds only in part is kept up to the gap,
// and a derived node only where the leaves under it are held; Load does
// not read the derived levels.
func TestLoadGap(t *testing.T) {
	h, err := Load(64, 1<<10, func(lvl uint, count uint64, put func([]byte)) error {
		if lvl >= 1 && lvl <= derived {
			t.Errorf("Load read derived level %d", lvl)
		}
		for i := range count {
			if lvl == 3 && i == 3 || lvl == 0 && i == 37 {
				break
			}
			put(hashOf(compact.NewNodeID(lvl, i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, hashSize)
	for _, c := range []struct {
		lvl  uint
		i    uint64
		held bool
	}{{3, 2, true}, {3, 3, false}, {0, 36, true}, {0, 37, false}, {1, 17, true}, {1, 18, false}, {2, 8, true}, {2, 9, false}} {
		id := compact.NewNodeID(c.lvl, c.i)
		if got := h.Read(id, buf); got != c.held {
			t.Errorf("node %v: held %v, want %v", id, got, c.held)
		} else if got && !bytes.Equal(buf, hashOf(id)) {
			t.Errorf("node %v: wrong hash", id)
		}
	}
	// A later batch does not extend a level past its gap.
	h = h.With(72, nodesOf(64, 72))
	if h.Read(compact.NewNodeID(0, 64), buf) || h.Read(compact.NewNodeID(3, 8), buf) {
		t.Error("a level extended past its gap")
	}
	if !h.Read(compact.NewNodeID(6, 0), buf) || !bytes.Equal(buf, hashOf(compact.NewNodeID(6, 0))) {
		t.Error("node (6, 0) not held")
	}
}
