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
			var n uint64
			for k := l; k < 64; k++ {
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

func hashOf(id compact.NodeID) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(id.Level))
	binary.BigEndian.PutUint64(b[8:], id.Index)
	h := sha256.Sum256(b[:])
	return h[:]
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
			held := 0
			for lvl := uint(0); size>>lvl > 0; lvl++ {
				for i := range size >> lvl {
					id := compact.NewNodeID(lvl, i)
					a, b := make([]byte, hashSize), make([]byte, hashSize)
					okA, okB := h.Read(id, a), loaded.Read(id, b)
					if okA != okB || !bytes.Equal(a, b) {
						t.Fatalf("max %d size %d node %v: With holds %v, Load %v", max, size, id, okA, okB)
					}
					if okA {
						held++
						if !bytes.Equal(a, hashOf(id)) {
							t.Fatalf("max %d size %d node %v: wrong hash", max, size, id)
						}
					}
					if want := lvl >= Min(size, max); okA != want {
						t.Fatalf("max %d size %d node %v: held %v, want %v", max, size, id, okA, want)
					}
				}
			}
			if uint64(held) > max {
				t.Fatalf("max %d size %d: %d nodes held", max, size, held)
			}
		}
	}
}

// TestLoadGap: a level the store holds only in part is kept up to the gap.
func TestLoadGap(t *testing.T) {
	h, err := Load(16, 1<<10, func(lvl uint, count uint64, put func([]byte)) error {
		for i := range count {
			if lvl == 1 && i == 3 {
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
	if !h.Read(compact.NewNodeID(1, 2), buf) {
		t.Error("node (1, 2) before the gap not held")
	}
	if h.Read(compact.NewNodeID(1, 3), buf) {
		t.Error("node (1, 3) at the gap held")
	}
	// A later batch does not extend a level past its gap.
	h = h.With(17, nodesOf(16, 17))
	if !h.Read(compact.NewNodeID(0, 16), buf) {
		t.Error("new leaf (0, 16) not held")
	}
}
