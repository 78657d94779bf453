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

// derived is how many levels above level 0 are not stored but hashed from
// the leaves when read, in a tree held whole: a node of level d is the
// hash of its 2^d leaves (2^d - 1 hashes), so a proof's nodes of levels 1
// and 2 cost 4 hashes, about a microsecond, and those two levels, three
// eighths of a whole tree's nodes, take no memory. A tree too big to be
// held whole keeps levels derived+1 and up (and higher, as it grows), so
// that the lowest hot level is always stored: a level is never hashed in
// bulk when the tree outgrows its memory.
const derived = 2

// stored is the number of nodes kept of levels min and up of a tree of
// this size: levels 1 to derived are not kept when min is 0.
func stored(size uint64, min uint) uint64 {
	var n uint64
	for l := min; l < 64; l++ {
		if min == 0 && l >= 1 && l <= derived {
			continue
		}
		n += size >> l
	}
	return n
}

// Min returns the lowest level kept in memory for a tree of this size when
// at most max nodes are kept: 0 (the whole tree, levels 1 to derived
// hashed from the leaves) if it fits, else the lowest level L above
// derived such that levels L and up hold at most max nodes. It returns 64,
// no level, if max is 0.
func Min(size, max uint64) uint {
	if max == 0 {
		return 64
	}
	if stored(size, 0) <= max {
		return 0
	}
	var n uint64 // the nodes of levels l and up
	for l := 63; l > derived; l-- {
		n += size >> uint(l)
		if n > max {
			return uint(l) + 1
		}
	}
	return derived + 1
}

// isDerived reports whether level lvl of a Nodes whose lowest level is min
// is hashed from the leaves rather than stored.
func isDerived(min, lvl uint) bool { return min == 0 && lvl >= 1 && lvl <= derived }

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
// the store reads the rest. When min is 0, levels 1 to derived hold
// nothing: their nodes are hashed from level 0's (Read).
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
	if isDerived(h.min, id.Level) && len(h.levels) > 0 {
		leaves := &h.levels[0]
		if id.Index >= leaves.n>>id.Level {
			return false
		}
		subtree(leaves, id.Index<<id.Level, id.Level, (*[hashSize]byte)(dst[:hashSize]))
		return true
	}
	if id.Level < h.min || id.Level-h.min >= uint(len(h.levels)) || isDerived(h.min, id.Level) {
		return false
	}
	v := &h.levels[id.Level-h.min]
	if id.Index >= v.n {
		return false
	}
	v.read(id.Index, dst)
	return true
}

// read copies hash i of the level, which v holds, into dst.
func (v *view) read(i uint64, dst []byte) {
	off := (i & (1<<chunkBits - 1)) * hashSize
	copy(dst[:hashSize], v.chunks[i>>chunkBits][off:off+hashSize])
	runtime.KeepAlive(v.l) // the memory stays mapped while it is read
}

// subtree writes to dst the RFC 6962 hash of the 2^lvl leaves from first,
// which leaves holds.
func subtree(leaves *view, first uint64, lvl uint, dst *[hashSize]byte) {
	if lvl == 0 {
		leaves.read(first, dst[:])
		return
	}
	var b [1 + 2*hashSize]byte
	b[0] = 1 // RFC 6962's interior node prefix
	subtree(leaves, first, lvl-1, (*[hashSize]byte)(b[1:1+hashSize]))
	subtree(leaves, first+1<<(lvl-1), lvl-1, (*[hashSize]byte)(b[1+hashSize:]))
	*dst = sha256.Sum256(b[:])
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
		if nd.ID.Level < n.min || nd.ID.Level >= 64 || isDerived(n.min, nd.ID.Level) {
			continue
		}
		i := int(nd.ID.Level - n.min)
		for len(n.levels) <= i {
			n.levels = append(n.levels, n.newView(n.min+uint(len(n.levels))))
		}
		if v := &n.levels[i]; nd.ID.Index == v.n && v.l.put(v.n, nd.Hash) {
			v.n++
		}
	}
	for i := range n.levels {
		if l := n.levels[i].l; l != nil {
			n.levels[i].chunks = l.mem.chunks
		}
	}
	return n
}

// newView returns an empty view of level lvl: one with no memory if the
// level is derived.
func (h *Nodes) newView(lvl uint) view {
	if isDerived(h.min, lvl) {
		return view{}
	}
	return view{l: newLevel()}
}

// Load builds the hot nodes of a stored tree of this size, keeping at most
// max nodes. level reads the first count nodes of a level, in index order,
// and hands each to put; it may stop early (a gap: the rest of that level is
// read from the store), never give more. level is nil for a tree with no
// hot level to read.
func Load(size, max uint64, level func(lvl uint, count uint64, put func(hash []byte)) error) (*Nodes, error) {
	l := NewLoader(size, max)
	lo, hi := l.Levels()
	for lvl := lo; lvl < hi; lvl++ {
		if count := l.Count(lvl); count > 0 {
			if err := level(lvl, count, func(hash []byte) { l.Put(lvl, hash) }); err != nil {
				return nil, err
			}
		}
	}
	return l.Nodes(), nil
}

// A Loader builds the hot nodes of a stored tree from the nodes a store
// reads, as [Load] does, for a store that reads several levels at once:
// each level's nodes come in index order, the levels' interleaved.
type Loader struct {
	h    *Nodes
	size uint64
	full []bool // past a refusal, nothing more of the level is contiguous
}

// NewLoader returns a Loader for a stored tree of this size that keeps at
// most max nodes.
func NewLoader(size, max uint64) *Loader {
	h := &Nodes{max: max, min: Min(size, max)}
	for lvl := h.min; lvl < 64 && size>>lvl > 0; lvl++ {
		h.levels = append(h.levels, h.newView(lvl))
	}
	return &Loader{h: h, size: size, full: make([]bool, len(h.levels))}
}

// Levels returns the levels [lo, hi) whose nodes l may take.
func (l *Loader) Levels() (lo, hi uint) {
	return l.h.min, l.h.min + uint(len(l.h.levels))
}

// Count returns how many nodes of level lvl l takes at most: the level's
// nodes, or 0 for a level outside Levels or hashed from the leaves.
func (l *Loader) Count(lvl uint) uint64 {
	lo, hi := l.Levels()
	if lvl < lo || lvl >= hi || isDerived(l.h.min, lvl) {
		return 0
	}
	return l.size >> lvl
}

// Put takes hash as the next node of level lvl. A hash that Count leaves
// no room for, that is not hashSize bytes or that finds no memory is
// refused, and so is every later one of that level.
func (l *Loader) Put(lvl uint, hash []byte) {
	if l.Count(lvl) == 0 {
		return
	}
	i := lvl - l.h.min
	v := &l.h.levels[i]
	if !l.full[i] && v.n < l.Count(lvl) && len(hash) == hashSize && v.l.put(v.n, hash) {
		v.n++
	} else {
		l.full[i] = true
	}
}

// Nodes returns the nodes l has taken. l is not used after.
func (l *Loader) Nodes() *Nodes {
	for i := range l.h.levels {
		if lv := l.h.levels[i].l; lv != nil {
			l.h.levels[i].chunks = lv.mem.chunks
		}
	}
	return l.h
}

// Committed reports whether node id is complete in a log of the given
// size: both stores hold, and serve, only complete nodes.
func Committed(id compact.NodeID, size uint64) bool {
	return id.Level < 64 && id.Index < size>>id.Level
}
