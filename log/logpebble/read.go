package logpebble

// The reads of a Store: its state, entries, tree nodes (the upper levels
// from memory), leaf index and checkpoints.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/entryrun"
	"github.com/provlog/provlog/log/internal/hot"
	"github.com/transparency-dev/merkle/compact"
)

// State implements [log.Storage.State].
func (s *Store) State(ctx context.Context) (log.State, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return log.State{}, err
	}
	s.calls.Done()
	if st.Size == 0 {
		return log.State{}, nil
	}
	return log.State{Size: st.Size, Range: cloneHashes(st.Range), Checkpoint: bytes.Clone(st.Checkpoint)}, nil
}

// Entries implements [log.Storage.Entries].
func (s *Store) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	if err := entryrun.Check(start, end, st.Size); err != nil {
		return nil, err
	}
	run := entryrun.New(start, end, st.Size, ErrCorrupt)
	if start == end {
		return run.Entries()
	}
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: entryKey(start), UpperBound: entryKey(end)})
	if err != nil {
		return nil, fmt.Errorf("reading entries [%d, %d): %w", start, end, err)
	}
	defer it.Close()
	want := make([]byte, 0, 9)
	for ok := it.First(); ok; ok = it.Next() {
		idx := run.Next()
		if !bytes.Equal(it.Key(), appendEntryKey(want[:0], idx)) {
			return nil, s.corrupt(run.Missing())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, s.readError(fmt.Errorf("reading entry %d: %w", idx, err))
		}
		run.Add(idx, append(make([]byte, 0, len(v)), v...))
	}
	if err := it.Error(); err != nil {
		return nil, s.readError(fmt.Errorf("reading entries [%d, %d): %w", start, end, err))
	}
	out, err := run.Entries()
	if err != nil {
		return nil, s.corrupt(err)
	}
	return out, nil
}

// ReadNodes implements [log.Storage.ReadNodes]. It answers from the upper
// levels of the tree it keeps in memory, and reads the rest in key order
// with one iterator; see keys.go for why a proof's or a tile's nodes lie
// close together.
func (s *Store) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	out := make([][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	slab := make([]byte, hashSize*len(ids))
	var order []int // the ids to read from Pebble
	for i, id := range ids {
		if !hot.Committed(id, st.Size) {
			return nil, fmt.Errorf("node (%d, %d) in a log of size %d: %w", id.Level, id.Index, st.Size, log.ErrNotFound)
		}
		if out[i] = slab[i*hashSize : (i+1)*hashSize : (i+1)*hashSize]; !st.hot.Read(id, out[i]) {
			out[i] = nil
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return out, nil
	}

	// Read the rest in key order, so that every seek moves forward and
	// Pebble can step to the next key instead of searching from the top.
	type want struct {
		key []byte
		i   int
	}
	ws := make([]want, len(order))
	keys := make([]byte, 0, nodeKeySize*len(order))
	for n, i := range order {
		keys = appendNodeKey(keys, ids[i])
		ws[n] = want{keys[n*nodeKeySize : (n+1)*nodeKeySize], i}
	}
	cmp := func(a, b want) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(ws, cmp) {
		slices.SortFunc(ws, cmp)
	}
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: ws[0].key, UpperBound: append(bytes.Clone(ws[len(ws)-1].key), 0)})
	if err != nil {
		return nil, s.readError(fmt.Errorf("reading nodes: %w", err))
	}
	defer it.Close()
	for n, w := range ws {
		id := ids[w.i]
		var found bool
		switch {
		case n > 0 && bytes.Equal(w.key, ws[n-1].key):
			found = true // a repeated id finds the iterator still on it
		case n > 0 && stepTo(it, w.key):
			found = it.Valid() && bytes.Equal(it.Key(), w.key)
		default:
			found = it.SeekGE(w.key) && bytes.Equal(it.Key(), w.key)
		}
		if !found {
			if err := it.Error(); err != nil {
				return nil, s.readError(fmt.Errorf("reading node (%d, %d): %w", id.Level, id.Index, err))
			}
			return nil, fmt.Errorf("node (%d, %d): %w", id.Level, id.Index, log.ErrNotFound)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, s.readError(fmt.Errorf("reading node (%d, %d): %w", id.Level, id.Index, err))
		}
		if len(v) != hashSize {
			return nil, s.corrupt(fmt.Errorf("%w: node (%d, %d) is %d bytes", ErrCorrupt, id.Level, id.Index, len(v)))
		}
		out[w.i] = slab[w.i*hashSize : (w.i+1)*hashSize : (w.i+1)*hashSize]
		copy(out[w.i], v)
	}
	return out, nil
}

// stepTo moves it forward with Next until it is at or past key, and reports
// whether it got there within a few steps; if not, the caller seeks. A
// tile's nodes are every other key or so, and a step is much cheaper than a
// seek.
func stepTo(it *pebble.Iterator, key []byte) bool {
	for range 4 {
		if !it.Next() || bytes.Compare(it.Key(), key) >= 0 {
			return true
		}
	}
	return false
}

// LeafIndex implements [log.Storage.LeafIndex]. Of several entries with the
// same leaf hash, it returns the first: the first found under 'h' (a
// version 1 store's entries, all before any under 'i'), else the first
// found in the earliest epoch under 'i' (a version 2 store's, all before
// any under 'j'), else in the earliest chunk under 'j', else in the open
// chunk (keys.go).
func (s *Store) LeafIndex(ctx context.Context, leafHash []byte) (uint64, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer s.calls.Done()
	notFound := fmt.Errorf("leaf hash %x: %w", leafHash, log.ErrNotFound)
	if len(leafHash) != hashSize || st.Size == 0 {
		return 0, notFound
	}
	ci := st.chunks
	idx, found, err := s.firstHashKey(leafHash)
	if err == nil && !found && ci.chunked > 0 {
		idx, found, err = s.firstLeafKey(leafHash, kindLeaf, 0, (ci.chunked-1)>>leafEpochBits)
	}
	open := ci.open(st.Size)
	if err == nil && !found && open > ci.chunked {
		idx, found, err = s.firstLeafKey(leafHash, kindChunk, ci.chunked>>ci.bits, (open-1)>>ci.bits)
	}
	if err == nil && !found {
		// The open chunk: its leaf hashes, read one by one (up to 4,095).
		err = leafLookupError(s, eachLeafHash(s.r, open, st.Size, func(i uint64, h []byte) bool {
			idx, found = i, bytes.Equal(h, leafHash)
			return !found
		}))
	}
	switch {
	case err != nil:
		return 0, err
	case !found, idx >= st.Size:
		return 0, notFound // or the first entry with this hash is still being committed
	}
	return idx, nil
}

// HasLeaf implements [log.LeafChecker]: whether the leaf-hash index holds
// the entry at index under leafHash: under 'j', 'i' or 'h' (keys.go), or,
// in the open chunk, as its level-0 node. One or two point reads, where
// LeafIndex seeks each chunk.
func (s *Store) HasLeaf(ctx context.Context, leafHash []byte, index uint64) (bool, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer s.calls.Done()
	if len(leafHash) != hashSize || index >= st.Size {
		return false, nil
	}
	ci := st.chunks
	if index >= ci.open(st.Size) {
		// In the open chunk: its leaf hash is the level-0 node.
		h, closer, err := s.r.Get(nodeKey(compact.NewNodeID(0, index)))
		if err != nil {
			return false, leafLookupError(s, err)
		}
		defer closer.Close()
		return bytes.Equal(h, leafHash), nil
	}
	keys := [][]byte{appendLeafKey(nil, leafHash, index), appendHashKey(nil, leafHash, index)}
	if index >= ci.chunked {
		keys = [][]byte{appendChunkKey(nil, leafHash, index, ci.bits)}
	}
	for _, k := range keys {
		_, closer, err := s.r.Get(k)
		if err == nil {
			closer.Close()
			return true, nil
		}
		if !errors.Is(err, pebble.ErrNotFound) {
			return false, leafLookupError(s, err)
		}
	}
	return false, nil
}

// firstHashKey finds leafHash's first index under 'h'.
func (s *Store) firstHashKey(leafHash []byte) (uint64, bool, error) {
	lower, upper := hashBounds(leafHash)
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, false, fmt.Errorf("looking up leaf hash: %w", err)
	}
	defer it.Close()
	if !it.First() {
		return 0, false, leafLookupError(s, it.Error())
	}
	idx, err := hashKeyIndex(it.Key())
	if err != nil {
		return 0, false, s.corrupt(fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	return idx, true, nil
}

// firstLeafKey finds leafHash's first index under kind ('i' or 'j'), in
// its epochs or chunks from first to last: one seek each, until one holds
// it.
func (s *Store) firstLeafKey(leafHash []byte, kind byte, first, last uint64) (uint64, bool, error) {
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
	if err != nil {
		return 0, false, fmt.Errorf("looking up leaf hash: %w", err)
	}
	defer it.Close()
	prefix := make([]byte, 0, leafKeySize)
	for epoch := first; epoch <= last; epoch++ {
		prefix = appendIndexPrefix(prefix[:0], kind, epoch, leafHash)
		if !it.SeekGE(prefix) {
			return 0, false, leafLookupError(s, it.Error()) // no key at or after it, in any later epoch either
		}
		key := it.Key()
		if bytes.HasPrefix(key, prefix) {
			idx, err := leafKeyIndex(key)
			if err != nil {
				return 0, false, s.corrupt(fmt.Errorf("%w: %w", ErrCorrupt, err))
			}
			return idx, true, nil
		}
		// The seek landed in a later epoch, so those between hold no key
		// (as the epochs of a store upgraded from version 1 hold none
		// before its first 'i' key): go on from that one.
		if e := leafKeyEpoch(key); e > epoch+1 {
			epoch = e - 1
		}
	}
	return 0, false, nil
}

// leafLookupError is s.readError of an error met while looking up a leaf
// hash, nil for nil.
func leafLookupError(s *Store, err error) error {
	if err == nil {
		return nil
	}
	return s.readError(fmt.Errorf("looking up leaf hash: %w", err))
}

// Checkpoint implements [log.Storage.Checkpoint].
func (s *Store) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	st, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.calls.Done()
	return entryrun.Checkpoint(size, st.Size, func() ([]byte, bool, error) {
		v, closer, err := s.r.Get(checkpointKey(size))
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, false, nil
		} else if err != nil {
			return nil, false, s.readError(err)
		}
		defer closer.Close()
		return append(make([]byte, 0, len(v)), v...), true, nil
	})
}

// Checkpoints implements [log.Storage.Checkpoints]. Close waits for it to
// return, so fn must not close the store.
func (s *Store) Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error {
	st, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.calls.Done()
	if from > st.Size || st.Size == 0 {
		return nil
	}
	it, err := s.r.NewIter(&pebble.IterOptions{LowerBound: checkpointKey(from), UpperBound: checkpointKey(st.Size + 1)})
	if err != nil {
		return fmt.Errorf("reading checkpoints: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		size, err := checkpointSize(it.Key())
		if err != nil {
			return s.corrupt(fmt.Errorf("%w: %w", ErrCorrupt, err))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return s.readError(fmt.Errorf("reading checkpoint for size %d: %w", size, err))
		}
		if err := fn(size, append(make([]byte, 0, len(v)), v...)); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return s.readError(fmt.Errorf("reading checkpoints: %w", err))
	}
	return nil
}

func cloneHashes(hs [][]byte) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = bytes.Clone(h)
	}
	return out
}

// reader is what the Store reads through: the Pebble database, or, in a
// read-only store that restored batches from its published record, an
// indexed batch over it.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}
