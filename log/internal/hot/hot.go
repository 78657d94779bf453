// Package hot keeps the upper levels of a log's Merkle tree in memory, for
// the stores under log/ (logpebble, logpg): every inclusion or consistency
// proof needs about one node per level, and the upper levels are few, so
// holding them turns most of a proof's node reads into memory reads.
//
// A [Nodes] is immutable once published: the next one, made by
// [Nodes.With] for a grown tree, may write the same memory past the
// lengths this one's readers look at, never within them. Only one
// goroutine at a time may call With or Load for a tree, on the newest
// Nodes (the stores' single committer).
//
// # Memory
//
// The levels live outside the Go heap, in chunks of chunkSize bytes
// mapped from the OS: the garbage collector neither scans them nor counts
// them toward its goal (which would let as much again of garbage pile up),
// and a level grows a chunk at a time, never copied, so it never holds
// twice its size while it grows. A level's chunks are unmapped once no
// Nodes holds the level (runtime.AddCleanup); readers copy hashes out
// ([Nodes.Read]) and keep no slice of them.
package hot

import (
	"crypto/sha256"
	"runtime"

	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
)

const hashSize = sha256.Size

// chunkBits sizes a level's chunks: 2^11 hashes, 64 KiB.
const chunkBits = 11

const chunkSize = hashSize << chunkBits

// Min returns the lowest level kept in memory for a tree of this size when
// at most max nodes are kept: the lowest level L such that levels L and up
// hold at most max nodes. It returns 64, no level, if max is 0.
func Min(size, max uint64) uint {
	if max == 0 {
		return 64
	}
	var n uint64 // the nodes of levels l and up
	for l := 63; l >= 0; l-- {
		n += size >> uint(l)
		if n > max {
			return uint(l) + 1
		}
	}
	return 0
}

// memory is a level's chunks, as mapped; the level's cleanup unmaps them.
type memory struct{ chunks [][]byte }

func (m *memory) release() {
	for _, c := range m.chunks {
		unmapMemory(c)
	}
	m.chunks = nil
}

// level owns the memory of one level of the tree, shared by every Nodes
// that holds the level; its cleanup runs when none does.
type level struct{ mem *memory }

func newLevel() *level {
	l := &level{mem: &memory{}}
	runtime.AddCleanup(l, (*memory).release, l.mem)
	return l
}

// put writes hash at position i of the level, mapping a chunk if needed.
func (l *level) put(i uint64, hash []byte) bool {
	c := i >> chunkBits
	for uint64(len(l.mem.chunks)) <= c {
		b, err := mapMemory(chunkSize)
		if err != nil {
			return false // not held: the store reads it
		}
		l.mem.chunks = append(l.mem.chunks, b)
	}
	off := (i & (1<<chunkBits - 1)) * hashSize
	copy(l.mem.chunks[c][off:off+hashSize], hash)
	return true
}

// view is a level as one Nodes sees it: the first n hashes, in chunks.
type view struct {
	l      *level
	chunks [][]byte // the chunks holding [0, n), as they were when n was reached
	n      uint64
}

// Nodes holds levels min and up of a tree: levels[i] holds the hashes of
// nodes (min+i, 0), (min+i, 1), … as far as they are known and contiguous;
// the store reads the rest.
type Nodes struct {
	max    uint64 // the most nodes to keep
	min    uint   // Min(size, max)
	levels []view
}

// Empty returns the hot nodes of an empty tree, keeping at most max nodes
// as the tree grows.
func Empty(max uint64) *Nodes { return &Nodes{max: max, min: Min(0, max)} }

// Max returns the most nodes h keeps.
func (h *Nodes) Max() uint64 { return h.max }

// Read copies the hash of node id into dst (hashSize bytes) and reports
// whether it is held.
func (h *Nodes) Read(id compact.NodeID, dst []byte) bool {
	if id.Level < h.min || id.Level-h.min >= uint(len(h.levels)) {
		return false
	}
	v := &h.levels[id.Level-h.min]
	if id.Index >= v.n {
		return false
	}
	off := (id.Index & (1<<chunkBits - 1)) * hashSize
	copy(dst[:hashSize], v.chunks[id.Index>>chunkBits][off:off+hashSize])
	runtime.KeepAlive(v.l) // the memory stays mapped while it is read
	return true
}

// With returns the hot nodes of the tree grown to size by these nodes,
// each level's in index order. A node that does not extend its level
// contiguously is left to the store, as are all later nodes of that level.
func (h *Nodes) With(size uint64, nodes []log.Node) *Nodes {
	n := &Nodes{max: h.max, min: Min(size, h.max)}
	// The lowest hot level only rises with the size, so n keeps a suffix
	// of h's levels.
	if h.min <= n.min && n.min-h.min < uint(len(h.levels)) {
		n.levels = append([]view(nil), h.levels[n.min-h.min:]...)
	}
	for _, nd := range nodes {
		if nd.ID.Level < n.min || nd.ID.Level >= 64 {
			continue
		}
		i := int(nd.ID.Level - n.min)
		for len(n.levels) <= i {
			n.levels = append(n.levels, view{l: newLevel()})
		}
		if v := &n.levels[i]; nd.ID.Index == v.n && v.l.put(v.n, nd.Hash) {
			v.n++
		}
	}
	for i := range n.levels {
		n.levels[i].chunks = n.levels[i].l.mem.chunks
	}
	return n
}

// Load builds the hot nodes of a stored tree of this size, keeping at most
// max nodes. level reads the first count nodes of a level, in index order,
// and hands each to put; it may stop early (a gap: the rest of that level is
// read from the store), never give more. level is nil for a tree with no
// hot level to read.
func Load(size, max uint64, level func(lvl uint, count uint64, put func(hash []byte)) error) (*Nodes, error) {
	h := &Nodes{max: max, min: Min(size, max)}
	for lvl := h.min; lvl < 64 && size>>lvl > 0; lvl++ {
		count := size >> lvl
		v := view{l: newLevel()}
		full := false
		err := level(lvl, count, func(hash []byte) {
			if !full && v.n < count && len(hash) == hashSize && v.l.put(v.n, hash) {
				v.n++
			} else {
				full = true // past a refusal, nothing more is contiguous
			}
		})
		if err != nil {
			return nil, err
		}
		v.chunks = v.l.mem.chunks
		h.levels = append(h.levels, v)
	}
	return h, nil
}

// Committed reports whether node id is complete in a log of the given
// size: both stores hold, and serve, only complete nodes.
func Committed(id compact.NodeID, size uint64) bool {
	return id.Level < 64 && id.Index < size>>id.Level
}
