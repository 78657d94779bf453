// Package logtest holds an in-memory [log.Storage] and the conformance suite
// every storage backend must pass.
//
// # Memory
//
// [Memory] keeps a log in maps and slices behind a mutex. It follows the
// [log.Storage] contract exactly (atomic commits, refused batches write
// nothing, [log.ErrNotFound] for what it does not hold, failure after Close),
// so tests of the sequencer and the read API can run without a disk.
//
// # Conformance
//
// [TestStorage] checks a backend against the contract: it commits batches
// built with a real compact range, rebuilds every proof from the stored
// nodes and verifies it against the reference tree in
// github.com/transparency-dev/merkle/testonly, and checks refusals, missing
// data, durability across reopening and concurrent readers. Run it with
// -race.
//
// # Batch rules
//
// Beyond the contract, every backend refuses, writing nothing, a batch
// that fails [log.Batch.Check]; TestStorage checks each rule.
package logtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/internal/entryrun"
	"github.com/transparency-dev/merkle/compact"
)

// hashSize is the size of every hash the stores accept: RFC 6962 with SHA-256.
const hashSize = 32

var errClosed = errors.New("memory store is closed")

// Memory is an in-memory [log.Storage]. It is safe for concurrent use, and
// it copies every slice it is given or returns.
type Memory struct {
	d      *memData
	closed atomic.Bool
}

// memData is the log a Memory handle reads and writes; handles made by
// [Memory.Reopen] share it.
type memData struct {
	mu          sync.RWMutex
	state       log.State
	entries     [][]byte
	nodes       map[compact.NodeID][]byte
	leaves      map[string]uint64
	checkpoints map[uint64][]byte
	ends        []uint64 // sizes of committed states, increasing
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{d: &memData{
		nodes:       make(map[compact.NodeID][]byte),
		leaves:      make(map[string]uint64),
		checkpoints: make(map[uint64][]byte),
	}}
}

// Reopen returns a new handle on the same log, as reopening a store on disk
// would after m was closed. It lets tests simulate a restart; m itself stays
// closed (or open) as it was.
func (m *Memory) Reopen() *Memory {
	return &Memory{d: m.d}
}

// Commit implements [log.Storage.Commit].
func (m *Memory) Commit(ctx context.Context, b *log.Batch) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	d := m.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := b.Check(d.state.Size); err != nil {
		return fmt.Errorf("refusing batch: %w", err)
	}
	for i, e := range b.Entries {
		d.entries = append(d.entries, bytes.Clone(nonNil(e)))
		idx := b.Start + uint64(i)
		h := bytes.Clone(b.LeafHashes[i])
		d.nodes[compact.NewNodeID(0, idx)] = h
		if _, ok := d.leaves[string(h)]; !ok {
			d.leaves[string(h)] = idx // keep the first, as logpebble does
		}
	}
	for _, n := range b.Nodes {
		if n.ID.Level > 0 {
			d.nodes[n.ID] = bytes.Clone(n.Hash)
		}
	}
	d.state = cloneState(b.State)
	d.checkpoints[b.State.Size] = bytes.Clone(nonNil(b.State.Checkpoint))
	d.ends = append(d.ends, b.State.Size)
	return nil
}

// State implements [log.Storage.State].
func (m *Memory) State(ctx context.Context) (log.State, error) {
	if err := m.check(ctx); err != nil {
		return log.State{}, err
	}
	m.d.mu.RLock()
	defer m.d.mu.RUnlock()
	return cloneState(m.d.state), nil
}

// Entries implements [log.Storage.Entries].
func (m *Memory) Entries(ctx context.Context, start, end uint64) ([][]byte, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.d.mu.RLock()
	defer m.d.mu.RUnlock()
	if err := entryrun.Check(start, end, m.d.state.Size); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, end-start)
	for _, e := range m.d.entries[start:end] {
		out = append(out, bytes.Clone(e))
	}
	return out, nil
}

// ReadNodes implements [log.Storage.ReadNodes].
func (m *Memory) ReadNodes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.d.mu.RLock()
	defer m.d.mu.RUnlock()
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := m.d.nodes[id]
		if !ok {
			return nil, fmt.Errorf("node (%d, %d): %w", id.Level, id.Index, log.ErrNotFound)
		}
		out[i] = bytes.Clone(h)
	}
	return out, nil
}

// LeafIndex implements [log.Storage.LeafIndex]. Of several entries with the
// same leaf hash, it returns the first.
func (m *Memory) LeafIndex(ctx context.Context, leafHash []byte) (uint64, error) {
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	m.d.mu.RLock()
	defer m.d.mu.RUnlock()
	idx, ok := m.d.leaves[string(leafHash)]
	if !ok {
		return 0, fmt.Errorf("leaf hash %x: %w", leafHash, log.ErrNotFound)
	}
	return idx, nil
}

// Checkpoint implements [log.Storage.Checkpoint].
func (m *Memory) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.d.mu.RLock()
	defer m.d.mu.RUnlock()
	cp, ok := m.d.checkpoints[size]
	if !ok {
		return nil, fmt.Errorf("checkpoint for size %d: %w", size, log.ErrNotFound)
	}
	return bytes.Clone(cp), nil
}

// Checkpoints implements [log.Storage.Checkpoints]. It does not hold its
// lock while fn runs, so fn may call m and commits may proceed.
func (m *Memory) Checkpoints(ctx context.Context, from uint64, fn func(size uint64, note []byte) error) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	m.d.mu.RLock()
	ends := m.d.ends[:len(m.d.ends):len(m.d.ends)]
	m.d.mu.RUnlock()
	for _, size := range ends[sort.Search(len(ends), func(i int) bool { return ends[i] >= from }):] {
		cp, err := m.Checkpoint(ctx, size)
		if err != nil {
			return err
		}
		if err := fn(size, cp); err != nil {
			return err
		}
	}
	return nil
}

// Close implements [log.Storage.Close]. Closing a closed handle fails.
func (m *Memory) Close() error {
	if m.closed.Swap(true) {
		return errClosed
	}
	return nil
}

func (m *Memory) check(ctx context.Context) error {
	if m.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

func cloneState(s log.State) log.State {
	var r [][]byte
	if s.Range != nil {
		r = make([][]byte, len(s.Range))
		for i, h := range s.Range {
			r[i] = bytes.Clone(h)
		}
	}
	return log.State{Size: s.Size, Range: r, Checkpoint: bytes.Clone(s.Checkpoint)}
}

// nonNil makes an empty entry or note read back as empty rather than nil.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

var _ log.Storage = (*Memory)(nil)
