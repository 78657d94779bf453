package logpebble

// The leaf-hash index of state version 3 (keys.go, "The leaf-hash index"):
// where its chunks stand, the commit that writes a chunk's keys once the
// chunk is complete, and the look-ups in the open chunk, whose leaf hashes
// are found among the level-0 nodes.

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/transparency-dev/merkle/compact"

	"github.com/provlog/provlog/log"
)

// chunkIndex is how a store's leaf-hash index is laid out: entries before
// chunked have 'h' or 'i' keys; from chunked on, 'j' keys once their chunk
// (2^bits entries) is complete.
type chunkIndex struct {
	bits    uint   // chunkBits, or a test's
	chunked uint64 // the first index under 'j': 0, or the size of the store an older program left
}

func (ci chunkIndex) mask() uint64 { return uint64(1)<<ci.bits - 1 }

// open is the first index of a log of size whose 'j' key is not written
// yet: the open chunk's start, or chunked if later.
func (ci chunkIndex) open(size uint64) uint64 { return max(ci.chunked, size&^ci.mask()) }

// completed is how many 'j' keys appending n entries to a log of size
// writes.
func (ci chunkIndex) completed(size uint64, n int) uint64 {
	done := (size + uint64(n)) &^ ci.mask()
	if from := ci.open(size); done > from {
		return done - from
	}
	return 0
}

// writeChunks sets in pb the 'j' keys of every chunk that b completes,
// reading the leaf hashes of a chunk's entries before b from r's level-0
// nodes. A chunk's keys all go into the one batch, so into one memtable:
// Pebble flushes them as tables of their own, which overlap no other.
func (ci chunkIndex) writeChunks(pb *pebble.Batch, r reader, b *log.Batch) error {
	end := b.Start + uint64(len(b.Entries))
	key := make([]byte, 0, leafKeySize)
	var err error
	set := func(index uint64, h []byte) bool {
		if err = pb.Set(appendChunkKey(key[:0], h, index, ci.bits), nil, nil); err != nil {
			err = fmt.Errorf("building batch: %w", err)
		}
		return err == nil
	}
	for from, next := ci.open(b.Start), ci.open(b.Start)|ci.mask()+1; next <= end; from, next = next, next+ci.mask()+1 {
		if to := min(next, b.Start); from < to {
			want := from
			rerr := eachLeafHash(r, from, to, func(index uint64, h []byte) bool {
				if index != want {
					return false
				}
				want++
				return set(index, h)
			})
			switch {
			case rerr != nil:
				return rerr
			case err != nil:
				return err
			case want != to:
				return fmt.Errorf("%w: leaf hash %d is missing", ErrCorrupt, want)
			}
		}
		for i := max(from, b.Start); i < next; i++ {
			if !set(i, b.LeafHashes[i-b.Start]) {
				return err
			}
		}
	}
	return nil
}

// eachLeafHash calls fn with the index and hash of each level-0 node of
// [from, to), in order, until fn returns false.
func eachLeafHash(r reader, from, to uint64, fn func(index uint64, h []byte) bool) error {
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: nodeKey(compact.NewNodeID(0, from)),
		UpperBound: nodeKey(compact.NewNodeID(0, to)),
	})
	if err != nil {
		return fmt.Errorf("reading leaf hashes: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != nodeKeySize || k[nodeKeySize-1] != 0 {
			continue // a node above level 0, ending at the same leaf
		}
		v := it.Value()
		index := binary.BigEndian.Uint64(k[2:10])<<8 | uint64(k[10]) // tile, end (keys.go)
		if len(v) != hashSize {
			return fmt.Errorf("%w: leaf hash %d is %d bytes", ErrCorrupt, index, len(v))
		}
		if !fn(index, v) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("reading leaf hashes: %w", err)
	}
	return nil
}
