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

// legacyChunkBits are the chunk sizes of the builds whose state did not name
// it: 8f2e5ac and f8945f4 wrote chunks of 2^14, 3f114e6 to 9f9e776 of 2^12.
var legacyChunkBits = []uint{12, 14}

// unnamedChunkBits finds the chunks' size of a store of size whose state
// does not name it (and whose entries from chunked on are indexed under
// 'j'): of this program's size (bits) and those of the builds that wrote
// such states, the one under which exactly the chunks present are
// complete, the last 'j' key's chunk being the last complete one. With no
// chunk written, bits if no chunk of it is complete yet. It is
// [ErrCorrupt] if no size fits.
func unnamedChunkBits(r reader, size, chunked uint64, bits uint) (uint, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{kindChunk}, UpperBound: []byte{kindChunk + 1}})
	if err != nil {
		return 0, fmt.Errorf("reading the leaf-hash index: %w", err)
	}
	defer it.Close()
	found := it.Last()
	var chunk, index uint64
	if found {
		if index, err = leafKeyIndex(it.Key()); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		chunk = leafKeyEpoch(it.Key())
	} else if err := it.Error(); err != nil {
		return 0, fmt.Errorf("reading the leaf-hash index: %w", err)
	}
	for _, b := range append([]uint{bits}, legacyChunkBits...) {
		complete := size >> b // chunks complete under 2^b
		switch {
		case !found && complete<<b <= chunked:
			return b, nil
		case found && complete<<b > chunked && complete-1 == chunk && index>>b == chunk:
			return b, nil
		}
	}
	return 0, fmt.Errorf("%w: the state of size %d does not name its chunks' size, and no size of 2^%d fits the keys under 'j'", ErrCorrupt, size, append([]uint{bits}, legacyChunkBits...))
}
