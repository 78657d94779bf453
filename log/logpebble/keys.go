package logpebble

// Key layout. This file is the only place that knows it.
//
// Every key starts with one byte naming its kind. Numbers are unsigned
// 64-bit big-endian, so that keys of one kind sort by index and the
// sequencer's writes land at the end of each kind's range, or (the
// leaf-hash index) at the end of its last epoch. All hashes are 32 bytes
// (RFC 6962 with SHA-256).
//
//	'e' index                → entry bytes, exactly as appended
//	'n' T tile end l         → 32-byte hash of the perfect node (level, index),
//	                           level 0 being the leaf hashes; see below
//	'j' chunk leaf hash(32) index
//	                         → empty; one key per appended entry (chunk:
//	                           index >> 12, 4 bytes), written when its chunk
//	                           is complete, so a leaf hash appended twice has
//	                           two keys; see "The leaf-hash index"
//	'i' epoch leaf hash(32) index
//	                         → empty: the index of the entries a store of
//	                           state version 2 holds (epoch: index >> 16);
//	                           read, never written
//	'h' leaf hash(32) index  → empty: the index of the entries a store of
//	                           state version 1 holds; read, never written
//	'c' size                 → signed checkpoint note of the state of this size
//	's'                      → state: version byte 3, size (8 bytes), the
//	                           first index under 'j' (8 bytes: 0, or the size
//	                           at which an older store was upgraded), the
//	                           chunks' size as a power of two (1 byte: 12),
//	                           then the compact range over [0, size): one
//	                           32-byte hash per set bit of size, left to
//	                           right. The state's checkpoint is the value at
//	                           'c' size. (main's builds 8f2e5ac to 9f9e776
//	                           wrote no chunks' size byte; such a store's
//	                           size is found from its 'j' keys.)
//
// A store with no 's' key is empty and must hold no other key.
//
// # Nodes
//
// Nodes are keyed by the tlog-tiles tile that holds them (c2sp.org/tlog-tiles:
// tile level T holds tree levels 8T to 8T+7, and tile N of level T is the
// subtree over nodes [256N, 256N+256) of tree level 8T), then by where they
// end inside the tile. The node (level, index) with T = level/8 and
// l = level%8 covers nodes [index<<l, (index+1)<<l) of level 8T; its key is
//
//	'n' T(1 byte) tile(8 bytes) end(1 byte) l(1 byte)
//
// with tile = ((index+1)<<l - 1) / 256 and end = ((index+1)<<l - 1) % 256.
// This order
//   - appends: the nodes completed by appending a leaf all end at that
//     leaf, so each tile level is written in key order;
//   - keeps a proof's lower levels together: the siblings on the path of leaf
//     i at levels 0 to 3 end within the 16 leaves around i, a few hundred
//     bytes of keys;
//   - keeps a tile together: the 256 nodes of a tile's level 8T (what
//     tlog-tiles serves) lie among its 510 keys, in order.
//
// All keys of a batch, including 's', are written in one Pebble batch, so the
// state never names a size whose entries, nodes or checkpoint are missing.
//
// # The leaf-hash index
//
// A leaf hash is random, so a key that starts with it lands anywhere in its
// kind's range. Version 1 keyed the index so ('h'), and every compaction
// out of level 0 then rewrote the whole index below it, growing with the
// log. Version 2 ('i') put the entry's epoch (index >> 16) first, so that
// a flush's keys overlapped only the last epoch's; but they still
// overlapped it, and each such compaction took in the newest entry tables
// too: Pebble adds to a compaction out of level 0 every level-0 table
// that lies between the base-level tables it already takes
// (growL0ForBase), and the newest entries, at the end of 'e', lie just
// before 'i'. So entries were rewritten on their way down where they
// would otherwise have moved (BenchmarkAppendCompaction over 240,000
// entries: 1,410 bytes compacted and 35 µs of CPU an entry, against 318
// and 24 with no index at all).
//
// Version 3 writes the index in order. The entries of a chunk (2^12 of
// them) get their 'j' keys all at once, in the commit that completes the
// chunk, which reads the leaf hashes of the chunk's earlier entries from
// their level-0 nodes; until then, those nodes are the open chunk's
// index. The keys of one batch go into one memtable, so Pebble flushes a
// chunk's keys as tables that overlap no other, and every table moves
// down whole (BenchmarkAppendCompaction over 720,000 entries: 712 bytes
// compacted and 25–28 µs an entry, against 1,650 and 34–37 with version
// 2). A look-up by leaf hash seeks each complete chunk (244 for a million
// entries) and then reads the open chunk's leaf hashes (up to 4,095). The
// commit that completes a chunk writes some 200 KB more and took 2.5–5.4
// ms where a commit of one entry took 0.3–1.1 ms. Nothing of the index is
// held in memory. (Chunks of 2^14 compacted less, 566 bytes an entry, but
// such a commit took 11–14 ms, and its 790 KB batch, which Pebble flushes
// as a batch of its own, raised the sidecar's peak heap by some 2 MiB.)
//
// A version 1 or 2 store keeps its 'h' or 'i' keys, which are read first:
// they hold every entry before the first index under 'j', which the state
// names. A store written by this program has state version 3, which an
// older program refuses to open rather than miss the entries it cannot
// find.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/transparency-dev/merkle/compact"
)

const (
	kindEntry      = 'e'
	kindNode       = 'n'
	kindHash       = 'h' // state version 1's leaf-hash index: read only
	kindLeaf       = 'i' // state version 2's: read only
	kindChunk      = 'j'
	kindCheckpoint = 'c'
	kindState      = 's'

	hashSize     = 32
	stateVersion = 3

	// leafEpochBits: an 'i' key's epoch is its index >> leafEpochBits.
	leafEpochBits = 16
	leafKeySize   = 1 + 4 + hashSize + 8
	// chunkBits: a 'j' key's chunk is its index >> chunkBits.
	chunkBits = 12
)

var stateKey = []byte{kindState}

// spanEnd is the end of the span of keys that key starts: the next kind, or
// for a node the next tile level. Pebble ends every table it writes at the
// end of a span (pebble.SpanPolicyFunc), so that no table holds two spans.
//
// That keeps an append from rewriting the log over and over. Entries,
// checkpoints and each tile level's nodes are written at the end of their
// span, so a flushed table of one span overlaps few tables below it, and a
// compaction out of level 0 reads little of the base level. A table of every
// kind, as Pebble writes by default, overlaps every table below it, and each
// such compaction rewrote the whole base level. Measured over 300,000
// entries: write amplification 2.95 -> 2.06, compaction reads 432 -> 174 MB.
// (Pebble still merges several level-0 tables at a time, so entries are
// rewritten once on their way down, not moved.)
func spanEnd(key []byte) []byte {
	switch {
	case len(key) == 0:
		return nil
	case key[0] == kindNode && len(key) > 1 && key[1] < 0xff:
		return []byte{kindNode, key[1] + 1}
	case key[0] < 0xff:
		return []byte{key[0] + 1}
	}
	return nil
}

func appendEntryKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, kindEntry), index)
}

func entryKey(index uint64) []byte {
	return appendEntryKey(make([]byte, 0, 9), index)
}

// nodeKeySize is the length of a node key.
const nodeKeySize = 1 + 1 + 8 + 1 + 1

// appendNodeKey appends the key of node id to dst. id.Level must be below 64
// and id.Index below 2^(64-id.Level), as they are for every node of a tree
// with at most 2^64 leaves.
func appendNodeKey(dst []byte, id compact.NodeID) []byte {
	t, l := id.Level/8, id.Level%8
	last := (id.Index+1)<<l - 1 // the last node of level 8T it covers
	dst = binary.BigEndian.AppendUint64(append(dst, kindNode, byte(t)), last>>8)
	return append(dst, byte(last), byte(l))
}

func nodeKey(id compact.NodeID) []byte {
	return appendNodeKey(make([]byte, 0, nodeKeySize), id)
}

// appendIndexPrefix appends the start of the keys of leafHash in an 'i'
// epoch or a 'j' chunk (kind) to dst: the key without its index.
func appendIndexPrefix(dst []byte, kind byte, group uint64, leafHash []byte) []byte {
	return append(binary.BigEndian.AppendUint32(append(dst, kind), uint32(group)), leafHash...)
}

// appendLeafKey appends the 'i' key of the entry at index with leafHash.
func appendLeafKey(dst, leafHash []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(appendIndexPrefix(dst, kindLeaf, index>>leafEpochBits, leafHash), index)
}

// leafKeyIndex returns the index in a key made by appendLeafKey or
// appendChunkKey.
func leafKeyIndex(key []byte) (uint64, error) {
	if len(key) != leafKeySize {
		return 0, fmt.Errorf("leaf hash key is %d bytes, want %d", len(key), leafKeySize)
	}
	return binary.BigEndian.Uint64(key[leafKeySize-8:]), nil
}

// leafKeyEpoch returns the epoch of an 'i' key, or the chunk of a 'j' key (of
// any length past it).
func leafKeyEpoch(key []byte) uint64 {
	if len(key) < 5 {
		return 0
	}
	return uint64(binary.BigEndian.Uint32(key[1:5]))
}

// appendChunkKey appends the 'j' key of the entry at index with leafHash,
// in chunks of 2^bits entries.
func appendChunkKey(dst, leafHash []byte, index uint64, bits uint) []byte {
	return binary.BigEndian.AppendUint64(appendIndexPrefix(dst, kindChunk, index>>bits, leafHash), index)
}

// appendHashKey appends the 'h' key (state version 1) of the entry at
// index with leafHash. Only tests write it, to make a version 1 store.
func appendHashKey(dst, leafHash []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(append(dst, kindHash), leafHash...), index)
}

// hashBounds returns the bounds [lower, upper) of the 'h' keys of leafHash.
func hashBounds(leafHash []byte) (lower, upper []byte) {
	lower = appendHashKey(nil, leafHash, 0)
	upper = append(appendHashKey(nil, leafHash, ^uint64(0)), 0)
	return lower, upper
}

// hashKeyIndex returns the index in a key made by appendHashKey.
func hashKeyIndex(key []byte) (uint64, error) {
	if len(key) != 1+hashSize+8 {
		return 0, fmt.Errorf("leaf hash key is %d bytes, want %d", len(key), 1+hashSize+8)
	}
	return binary.BigEndian.Uint64(key[1+hashSize:]), nil
}

func checkpointKey(size uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{kindCheckpoint}, size)
}

// checkpointSize returns the size in a key made by checkpointKey.
func checkpointSize(key []byte) (uint64, error) {
	if len(key) != 9 {
		return 0, fmt.Errorf("checkpoint key is %d bytes, want 9", len(key))
	}
	return binary.BigEndian.Uint64(key[1:]), nil
}

// kindBounds returns the bounds [lower, upper) of all keys of a kind.
func kindBounds(kind byte) (lower, upper []byte) {
	return []byte{kind}, []byte{kind + 1}
}

func encodeState(size uint64, ci chunkIndex, rng [][]byte) []byte {
	b := make([]byte, 0, 1+8+8+1+hashSize*len(rng))
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint64(b, ci.chunked)
	b = append(b, byte(ci.bits))
	for _, h := range rng {
		b = append(b, h...)
	}
	return b
}

// A newerError is a state written by a newer build, of a version this one
// does not read: not damage, so the store is reported as such (not as
// corrupt) and left as it is.
type newerError struct {
	version byte
}

func (e *newerError) Error() string {
	return fmt.Sprintf("written by a newer provlog (state version %d; this build reads up to %d): open it with that build or a later one", e.version, stateVersion)
}

// decodeState decodes a state of version 1, 2 or 3 (a *newerError for a
// later one). For versions 1 and 2,
// whose entries all have 'h' or 'i' keys, ci.chunked is size and ci.bits
// 0 (the program's to choose); for a state of version 3 that does not name
// its chunks' size, ci.bits is 0 too.
func decodeState(b []byte) (size uint64, ci chunkIndex, rng [][]byte, err error) {
	if len(b) < 9 {
		return 0, ci, nil, errors.New("state is too short")
	}
	v := b[0]
	if v > stateVersion {
		return 0, ci, nil, &newerError{version: v}
	}
	if v == 0 {
		return 0, ci, nil, errors.New("state has version 0")
	}
	size = binary.BigEndian.Uint64(b[1:9])
	ci.chunked, b = size, b[9:]
	if v == stateVersion {
		if len(b) < 8 {
			return 0, ci, nil, errors.New("state is too short")
		}
		ci.chunked, b = binary.BigEndian.Uint64(b), b[8:]
		if ci.chunked > size {
			return 0, ci, nil, fmt.Errorf("state of size %d names index %d as the first under 'j'", size, ci.chunked)
		}
		// The builds of main from 8f2e5ac to 9f9e776 wrote no byte for the
		// chunks' size: their compact range follows at once, a whole number
		// of hashes. ci.bits stays 0 and the store finds the size from its
		// 'j' keys (unnamedChunkBits).
		if len(b)%hashSize == 1 {
			ci.bits, b = uint(b[0]), b[1:]
			if ci.bits < 1 || ci.bits > 32 {
				return 0, ci, nil, fmt.Errorf("state names chunks of 2^%d entries", ci.bits)
			}
		}
	}
	n := bits.OnesCount64(size)
	if len(b) != n*hashSize {
		return 0, ci, nil, fmt.Errorf("state of size %d has %d bytes of compact range, want %d", size, len(b), n*hashSize)
	}
	for i := range n {
		rng = append(rng, append([]byte(nil), b[i*hashSize:(i+1)*hashSize]...))
	}
	return size, ci, rng, nil
}
