package logpebble

// The open chunk of the leaf-hash index (keys.go, "The leaf-hash index"):
// the leaf hashes of the entries whose 'j' keys are not written yet, and
// the commit that writes them once their chunk is complete.

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"
)

// chunkIndex is where a state's leaf-hash index stands. Entries before
// chunked have 'h' or 'i' keys; from chunked to start, 'j' keys (whole
// chunks, but for the first after an upgrade); from start to the state's
// size, their leaf hashes are in hashes. A chunkIndex is never changed:
// the commit that extends it makes another, which may share hashes'
// array (appending past what the older one holds).
type chunkIndex struct {
	bits    uint   // a chunk is 2^bits entries (chunkBits)
	chunked uint64 // the first index under 'j'
	start   uint64 // the first index in hashes: chunked or a chunk's start
	hashes  []byte // the leaf hashes from start on, 32 bytes each
}

// end is the index after the last one ci holds.
func (ci chunkIndex) end() uint64 { return ci.start + uint64(len(ci.hashes)/hashSize) }

// hash returns the leaf hash of index, which must be in [start, end).
func (ci chunkIndex) hash(index uint64) []byte {
	i := (index - ci.start) * hashSize
	return ci.hashes[i : i+hashSize]
}

// find returns the first index in [start, end) with leafHash.
func (ci chunkIndex) find(leafHash []byte) (uint64, bool) {
	for i := 0; i+hashSize <= len(ci.hashes); i += hashSize {
		if bytes.Equal(ci.hashes[i:i+hashSize], leafHash) {
			return ci.start + uint64(i/hashSize), true
		}
	}
	return 0, false
}

// add returns ci with the leaf hashes of the entries from ci.end() on,
// setting in pb the 'j' keys of every chunk they complete.
func (ci chunkIndex) add(pb *pebble.Batch, leafHashes [][]byte) (chunkIndex, error) {
	mask := uint64(1)<<ci.bits - 1
	for _, lh := range leafHashes {
		if ci.hashes == nil {
			ci.hashes = make([]byte, 0, (mask+1-ci.start&mask)*hashSize)
		}
		ci.hashes = append(ci.hashes, lh...)
		if next := ci.end(); next&mask == 0 {
			if err := ci.write(pb); err != nil {
				return ci, err
			}
			ci.start, ci.hashes = next, nil
		}
	}
	return ci, nil
}

// write sets in pb the 'j' keys of the complete chunk ci holds, in key
// order, so that Pebble writes them as one table that overlaps no other.
func (ci chunkIndex) write(pb *pebble.Batch) error {
	n := len(ci.hashes) / hashSize
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(ci.hash(ci.start+uint64(a)), ci.hash(ci.start+uint64(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	key := make([]byte, 0, leafKeySize)
	for _, i := range order {
		idx := ci.start + uint64(i)
		if err := pb.Set(appendChunkKey(key[:0], ci.hash(idx), idx, ci.bits), nil, nil); err != nil {
			return fmt.Errorf("building batch: %w", err)
		}
	}
	return nil
}

// loadChunk reads the open chunk of a state of size whose first index
// under 'j' is chunked: the leaf hashes (level-0 nodes) from the start of
// the last chunk, or chunked if later, to size.
func loadChunk(r reader, size, chunked uint64, bits uint) (chunkIndex, error) {
	ci := chunkIndex{bits: bits, chunked: chunked, start: max(chunked, size&^(uint64(1)<<bits-1))}
	if ci.start == size {
		return ci, nil
	}
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: nodeKey(compact.NewNodeID(0, ci.start)),
		UpperBound: nodeKey(compact.NewNodeID(0, size)),
	})
	if err != nil {
		return ci, fmt.Errorf("reading the leaf hashes of the open chunk: %w", err)
	}
	defer it.Close()
	ci.hashes = make([]byte, 0, (size-ci.start)*hashSize)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != nodeKeySize || k[nodeKeySize-1] != 0 {
			continue // a node above level 0, ending at the same leaf
		}
		if want := nodeKey(compact.NewNodeID(0, ci.end())); !bytes.Equal(k, want) {
			return ci, fmt.Errorf("%w: leaf hash %d is missing", ErrCorrupt, ci.end())
		}
		v := it.Value()
		if len(v) != hashSize {
			return ci, fmt.Errorf("%w: leaf hash %d is %d bytes", ErrCorrupt, ci.end(), len(v))
		}
		ci.hashes = append(ci.hashes, v...)
	}
	if err := it.Error(); err != nil {
		return ci, fmt.Errorf("reading the leaf hashes of the open chunk: %w", err)
	}
	if ci.end() != size {
		return ci, fmt.Errorf("%w: leaf hash %d is missing", ErrCorrupt, ci.end())
	}
	return ci, nil
}
