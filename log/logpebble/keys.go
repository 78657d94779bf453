package logpebble

// Key layout. This file is the only place that knows it.
//
// Every key starts with one byte naming its kind. Numbers are unsigned
// 64-bit big-endian, so that keys of one kind sort by index and the
// sequencer's writes land at the end of each kind's range: flushes become
// trivial moves instead of merges. All hashes are 32 bytes (RFC 6962 with
// SHA-256).
//
//	'e' index                → entry bytes, exactly as appended
//	'n' level(1 byte) index  → 32-byte hash of the perfect node (level, index);
//	                           level 0 holds the leaf hashes
//	'h' leaf hash(32) index  → empty; one key per appended entry, so a
//	                           leaf hash appended twice has two keys and
//	                           the first index is found by one seek, with
//	                           no read in the write path
//	'c' size                 → signed checkpoint note of the state of this size
//	's'                      → state: version byte 1, size (8 bytes), then the
//	                           compact range over [0, size): one 32-byte hash
//	                           per set bit of size, left to right. The state's
//	                           checkpoint is the value at 'c' size.
//
// A store with no 's' key is empty and must hold no other key.
//
// All keys of a batch, including 's', are written in one Pebble batch, so the
// state never names a size whose entries, nodes or checkpoint are missing.

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
	kindHash       = 'h'
	kindCheckpoint = 'c'
	kindState      = 's'

	hashSize     = 32
	stateVersion = 1
)

var stateKey = []byte{kindState}

func appendEntryKey(dst []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, kindEntry), index)
}

func entryKey(index uint64) []byte {
	return appendEntryKey(make([]byte, 0, 9), index)
}

// appendNodeKey appends the key of node id to dst; ReadNodes reuses one
// buffer for all the keys of a call.
func appendNodeKey(dst []byte, id compact.NodeID) []byte {
	return binary.BigEndian.AppendUint64(append(dst, kindNode, byte(id.Level)), id.Index)
}

func nodeKey(id compact.NodeID) []byte {
	return appendNodeKey(make([]byte, 0, 10), id)
}

func appendHashKey(dst, leafHash []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(append(dst, kindHash), leafHash...), index)
}

// hashBounds returns the bounds [lower, upper) of the keys of leafHash.
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

func encodeState(size uint64, rng [][]byte) []byte {
	b := make([]byte, 0, 1+8+hashSize*len(rng))
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, size)
	for _, h := range rng {
		b = append(b, h...)
	}
	return b
}

func decodeState(b []byte) (size uint64, rng [][]byte, err error) {
	if len(b) < 9 {
		return 0, nil, errors.New("state is too short")
	}
	if b[0] != stateVersion {
		return 0, nil, fmt.Errorf("state has version %d, this program reads version %d", b[0], stateVersion)
	}
	size = binary.BigEndian.Uint64(b[1:9])
	n := bits.OnesCount64(size)
	b = b[9:]
	if len(b) != n*hashSize {
		return 0, nil, fmt.Errorf("state of size %d has %d bytes of compact range, want %d", size, len(b), n*hashSize)
	}
	for i := range n {
		rng = append(rng, append([]byte(nil), b[i*hashSize:(i+1)*hashSize]...))
	}
	return size, rng, nil
}
