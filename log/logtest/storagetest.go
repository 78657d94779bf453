package logtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// TestStorage checks that a [log.Storage] keeps the contract, in the manner
// of golang.org/x/mod/sumdb/storage.TestStorage.
//
// newStore returns an empty store s and a function reopen. The suite calls
// reopen only after it has closed s; reopen must return a new handle on the
// same data (Open on the same directory, [Memory.Reopen]) and fail t if it
// cannot. The suite closes every handle it is given.
func TestStorage(t *testing.T, newStore func(t *testing.T) (s log.Storage, reopen func() log.Storage)) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, newStore) })
	t.Run("Grow", func(t *testing.T) { testGrow(t, newStore) })
	t.Run("Refuse", func(t *testing.T) { testRefuse(t, newStore) })
	t.Run("RefuseMalformed", func(t *testing.T) { testRefuseMalformed(t, newStore) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, newStore) })
	t.Run("Copies", func(t *testing.T) { testCopies(t, newStore) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, newStore) })
	t.Run("Reopen", func(t *testing.T) { testReopen(t, newStore) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore) })
	t.Run("BigEntries", func(t *testing.T) { testBigEntries(t, newStore) })
}

type newStoreFunc = func(t *testing.T) (log.Storage, func() log.Storage)

// A harness holds the open handle of the store under test and closes it at
// the end of the test.
type harness struct {
	t      *testing.T
	s      log.Storage
	reopen func() log.Storage
}

func start(t *testing.T, newStore newStoreFunc) *harness {
	s, reopen := newStore(t)
	h := &harness{t: t, s: s, reopen: reopen}
	t.Cleanup(func() {
		if h.s != nil {
			h.s.Close()
		}
	})
	return h
}

// restart closes the store and opens it again.
func (h *harness) restart() {
	h.t.Helper()
	err := h.s.Close()
	h.s = nil
	if err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.s = h.reopen()
}

// A model is the reference the store is checked against: what was committed,
// and the reference tree from github.com/transparency-dev/merkle/testonly.
type model struct {
	rf      *compact.RangeFactory
	tree    *testonly.Tree
	entries [][]byte
	hashes  [][]byte // leaf hashes
	ends    []uint64 // sizes at which batches ended
	cps     map[uint64][]byte
	state   log.State
	batches []*log.Batch // copies of the applied batches
}

func newModel() *model {
	return &model{
		rf:   &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren},
		tree: testonly.New(rfc6962.DefaultHasher),
		cps:  make(map[uint64][]byte),
	}
}

func (m *model) size() uint64 { return m.state.Size }

// prefix returns a model of the first n batches applied to m.
func (m *model) prefix(n int) *model {
	p := newModel()
	for _, b := range m.batches[:n] {
		p.apply(b)
	}
	return p
}

func (m *model) hasLeaf(leafHash []byte) bool {
	return slices.ContainsFunc(m.hashes, func(h []byte) bool { return bytes.Equal(h, leafHash) })
}

// batch returns the batch that appends entries to the model, as a sequencer
// would build it, without changing the model.
func (m *model) batch(t *testing.T, entries [][]byte) *log.Batch {
	t.Helper()
	cr, err := m.rf.NewRange(0, m.size(), cloneHashes(m.state.Range))
	if err != nil {
		t.Fatalf("NewRange: %v", err)
	}
	b := &log.Batch{Start: m.size(), Entries: entries}
	visit := func(id compact.NodeID, hash []byte) {
		b.Nodes = append(b.Nodes, log.Node{ID: id, Hash: bytes.Clone(hash)})
	}
	for _, e := range entries {
		h := rfc6962.DefaultHasher.HashLeaf(e)
		b.LeafHashes = append(b.LeafHashes, h)
		if err := cr.Append(h, visit); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	root, err := cr.GetRootHash(nil)
	if err != nil {
		t.Fatalf("GetRootHash: %v", err)
	}
	b.State = log.State{
		Size:       cr.End(),
		Range:      cloneHashes(cr.Hashes()),
		Checkpoint: fmt.Appendf(nil, "cp %d\n%x\n", cr.End(), root),
	}
	return b
}

// apply records a committed batch, copying it so that later changes to b do
// not reach the model.
func (m *model) apply(b *log.Batch) {
	m.batches = append(m.batches, cloneBatch(b))
	for i, e := range b.Entries {
		m.entries = append(m.entries, bytes.Clone(e))
		m.hashes = append(m.hashes, bytes.Clone(b.LeafHashes[i]))
	}
	m.tree.Append(cloneHashes(b.LeafHashes)...)
	m.ends = append(m.ends, b.State.Size)
	m.cps[b.State.Size] = bytes.Clone(b.State.Checkpoint)
	m.state = cloneState(b.State)
}

// commit builds the batch appending entries, commits it and records it.
func commit(t *testing.T, s log.Storage, m *model, entries [][]byte) *log.Batch {
	t.Helper()
	b := m.batch(t, entries)
	if err := s.Commit(t.Context(), b); err != nil {
		t.Fatalf("Commit(batch [%d, %d)): %v", b.Start, b.State.Size, err)
	}
	m.apply(b)
	return b
}

// randomEntries returns n entries of up to 200 bytes. If m is not nil, about
// one in 50 repeats an entry of m, so that the log holds duplicate leaf
// hashes; otherwise all are new.
func randomEntries(r *rand.Rand, m *model, n int) [][]byte {
	es := make([][]byte, n)
	for i := range es {
		if m != nil && len(m.entries) > 0 && r.IntN(50) == 0 {
			es[i] = bytes.Clone(m.entries[r.IntN(len(m.entries))])
			continue
		}
		e := fmt.Appendf(nil, "entry %d.%d ", r.Uint64(), i)
		for range r.IntN(200) {
			e = append(e, byte(r.Uint32()))
		}
		es[i] = e
	}
	return es
}

// checkStore checks everything the store answers against the model: the
// state, entries, the nodes of the compact range, inclusion and consistency
// proofs rebuilt from stored nodes, the leaf-hash index and the checkpoints.
// Proofs and lookups are sampled so that the check stays cheap.
func checkStore(t *testing.T, s log.Storage, m *model, r *rand.Rand) {
	t.Helper()
	ctx := t.Context()
	size := m.size()

	st, err := s.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if !stateEqual(st, m.state) {
		t.Fatalf("State() = %s, want %s", fmtState(st), fmtState(m.state))
	}

	checkEntries(t, s, m, 0, size)
	checkEntries(t, s, m, size, size)
	for range 5 {
		a := r.Uint64N(size + 1)
		checkEntries(t, s, m, a, a+r.Uint64N(size-a+1))
	}

	ids := compact.RangeNodes(0, size, nil)
	got, err := s.ReadNodes(ctx, ids)
	if err != nil {
		t.Fatalf("ReadNodes(compact range of %d): %v", size, err)
	}
	if !hashesEqual(got, m.state.Range) {
		t.Fatalf("ReadNodes(compact range of %d) = %x, want %x", size, got, m.state.Range)
	}
	if size == 0 {
		checkCheckpoints(t, s, m, r)
		return
	}
	cr, err := m.rf.NewRange(0, size, st.Range)
	if err != nil {
		t.Fatalf("NewRange(state): %v", err)
	}
	if root, _ := cr.GetRootHash(nil); !bytes.Equal(root, m.tree.Hash()) {
		t.Fatalf("root of the stored compact range = %x, want %x", root, m.tree.Hash())
	}

	// Inclusion at the current size: the ends, the last batch, random leaves.
	idx := []uint64{0, size - 1}
	if n := len(m.ends); n > 1 {
		for i := m.ends[n-2]; i < size && i < m.ends[n-2]+20; i++ {
			idx = append(idx, i)
		}
	}
	for range 20 {
		idx = append(idx, r.Uint64N(size))
	}
	for _, i := range idx {
		checkInclusion(t, s, m, i, size)
	}
	// Inclusion at earlier sizes.
	for range 10 {
		old := 1 + r.Uint64N(size)
		checkInclusion(t, s, m, r.Uint64N(old), old)
	}

	// Consistency from earlier batch ends and random sizes.
	olds := []uint64{1, size}
	for i, end := range m.ends {
		if i >= len(m.ends)-10 {
			olds = append(olds, end)
		}
	}
	for range 5 {
		olds = append(olds, 1+r.Uint64N(size))
	}
	for _, old := range olds {
		checkConsistency(t, s, m, old, size)
	}

	for _, i := range idx {
		g, err := s.LeafIndex(ctx, m.hashes[i])
		if err != nil {
			t.Fatalf("LeafIndex(leaf %d): %v", i, err)
		}
		if g >= size || !bytes.Equal(m.hashes[g], m.hashes[i]) {
			t.Fatalf("LeafIndex(leaf %d) = %d, whose leaf hash differs", i, g)
		}
	}

	checkCheckpoints(t, s, m, r)
}

func checkEntries(t *testing.T, s log.Storage, m *model, start, end uint64) {
	t.Helper()
	got, err := s.Entries(t.Context(), start, end)
	if err != nil {
		t.Fatalf("Entries(%d, %d): %v", start, end, err)
	}
	want := m.entries[start:end]
	if len(got) != len(want) {
		t.Fatalf("Entries(%d, %d) returned %d entries, want %d", start, end, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("Entries(%d, %d)[%d] = %.40q, want %.40q", start, end, i, got[i], want[i])
		}
	}
}

func checkInclusion(t *testing.T, s log.Storage, m *model, index, size uint64) {
	t.Helper()
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		t.Fatalf("proof.Inclusion(%d, %d): %v", index, size, err)
	}
	hashes, err := s.ReadNodes(t.Context(), nodes.IDs)
	if err != nil {
		t.Fatalf("ReadNodes(inclusion %d in %d): %v", index, size, err)
	}
	p, err := nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		t.Fatalf("Rehash(inclusion %d in %d): %v", index, size, err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, m.hashes[index], p, m.tree.HashAt(size)); err != nil {
		t.Fatalf("inclusion proof of %d in %d from stored nodes: %v", index, size, err)
	}
	want, err := m.tree.InclusionProof(index, size)
	if err != nil {
		t.Fatal(err)
	}
	if !hashesEqual(p, want) {
		t.Fatalf("inclusion proof of %d in %d = %x, want %x", index, size, p, want)
	}
}

func checkConsistency(t *testing.T, s log.Storage, m *model, size1, size2 uint64) {
	t.Helper()
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		t.Fatalf("proof.Consistency(%d, %d): %v", size1, size2, err)
	}
	hashes, err := s.ReadNodes(t.Context(), nodes.IDs)
	if err != nil {
		t.Fatalf("ReadNodes(consistency %d to %d): %v", size1, size2, err)
	}
	p, err := nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		t.Fatalf("Rehash(consistency %d to %d): %v", size1, size2, err)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, p, m.tree.HashAt(size1), m.tree.HashAt(size2)); err != nil {
		t.Fatalf("consistency proof from %d to %d from stored nodes: %v", size1, size2, err)
	}
}

// checkCheckpoints checks Checkpoint at every batch end and between them,
// and Checkpoints from the start, from random sizes and stopping early.
func checkCheckpoints(t *testing.T, s log.Storage, m *model, r *rand.Rand) {
	t.Helper()
	ctx := t.Context()
	prev := uint64(0)
	for _, end := range m.ends {
		got, err := s.Checkpoint(ctx, end)
		if err != nil {
			t.Fatalf("Checkpoint(%d): %v", end, err)
		}
		if !bytes.Equal(got, m.cps[end]) {
			t.Fatalf("Checkpoint(%d) = %q, want %q", end, got, m.cps[end])
		}
		if end-prev > 1 {
			checkNotFound(t, fmt.Sprintf("Checkpoint(%d)", prev+1), func() error {
				_, err := s.Checkpoint(ctx, prev+1+r.Uint64N(end-prev-1))
				return err
			})
		}
		prev = end
	}
	for _, size := range []uint64{0, m.size() + 1, 1 << 63} {
		checkNotFound(t, fmt.Sprintf("Checkpoint(%d)", size), func() error {
			_, err := s.Checkpoint(ctx, size)
			return err
		})
	}

	froms := []uint64{0, 1, m.size(), m.size() + 1, r.Uint64N(m.size() + 2)}
	for _, from := range froms {
		var sizes []uint64
		err := s.Checkpoints(ctx, from, func(size uint64, note []byte) error {
			if !bytes.Equal(note, m.cps[size]) {
				return fmt.Errorf("note for size %d = %q, want %q", size, note, m.cps[size])
			}
			sizes = append(sizes, size)
			return nil
		})
		if err != nil {
			t.Fatalf("Checkpoints(%d): %v", from, err)
		}
		var want []uint64
		for _, end := range m.ends {
			if end >= from {
				want = append(want, end)
			}
		}
		if !slices.Equal(sizes, want) {
			t.Fatalf("Checkpoints(%d) visited sizes %v, want %v", from, sizes, want)
		}
	}

	if len(m.ends) >= 2 {
		stop := errors.New("stop")
		calls := 0
		err := s.Checkpoints(ctx, 0, func(uint64, []byte) error {
			calls++
			if calls == 2 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != 2 {
			t.Fatalf("Checkpoints with fn failing on the 2nd call: err = %v after %d calls, want %v after 2", err, calls, stop)
		}
	}
}

func checkNotFound(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := f(); !errors.Is(err, log.ErrNotFound) {
		t.Fatalf("%s: err = %v, want ErrNotFound", what, err)
	}
}

func testEmpty(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	ctx := t.Context()
	st, err := h.s.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if st.Size != 0 || len(st.Range) != 0 || len(st.Checkpoint) != 0 {
		t.Fatalf("State() of an empty store = %s, want the zero State", fmtState(st))
	}
	if es, err := h.s.Entries(ctx, 0, 0); err != nil || len(es) != 0 {
		t.Fatalf("Entries(0, 0) = %d entries, %v; want none", len(es), err)
	}
	if hs, err := h.s.ReadNodes(ctx, nil); err != nil || len(hs) != 0 {
		t.Fatalf("ReadNodes(nil) = %d hashes, %v; want none", len(hs), err)
	}
	checkNotFound(t, "Entries(0, 1)", func() error { _, err := h.s.Entries(ctx, 0, 1); return err })
	checkNotFound(t, "ReadNodes(0, 0)", func() error {
		_, err := h.s.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(0, 0)})
		return err
	})
	checkNotFound(t, "LeafIndex", func() error {
		_, err := h.s.LeafIndex(ctx, rfc6962.DefaultHasher.HashLeaf(nil))
		return err
	})
	checkCheckpoints(t, h.s, newModel(), rand.New(rand.NewPCG(1, 1)))

	// An empty store that was closed reopens empty.
	h.restart()
	checkStore(t, h.s, newModel(), rand.New(rand.NewPCG(1, 1)))
}

func testGrow(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(2, 2))
	checkStore(t, h.s, m, r)
	// Small batches first, so that small trees and every shape of the right
	// edge are covered, then random batches of up to 300 entries.
	sizes := []int{1, 1, 2, 1, 3, 8, 1, 16, 5, 300}
	for total := 0; total < 3000; {
		n := 1 + r.IntN(300)
		if len(sizes) > 0 {
			n, sizes = sizes[0], sizes[1:]
		}
		commit(t, h.s, m, randomEntries(r, m, n))
		total += n
		checkStore(t, h.s, m, r)
	}
}

// A refusalCase turns b, a well-formed batch that appends new entries to
// the model m, into a batch Commit must refuse: it changes b or returns
// another batch.
type refusalCase struct {
	name   string
	mutate func(t *testing.T, m *model, b *log.Batch) *log.Batch
}

func testRefuse(t *testing.T, newStore newStoreFunc) {
	fresh := func(tag string) [][]byte { return [][]byte{[]byte(tag + " 1"), []byte(tag + " 2")} }
	testRefusals(t, newStore, []refusalCase{
		// Well-formed batches that do not start at the stored size.
		{"replayed batch", func(t *testing.T, m *model, b *log.Batch) *log.Batch {
			return cloneBatch(m.batches[len(m.batches)-1])
		}},
		{"batch built on a stale state", func(t *testing.T, m *model, b *log.Batch) *log.Batch {
			return m.prefix(len(m.batches)-1).batch(t, fresh("stale"))
		}},
		{"batch built on an empty log", func(t *testing.T, m *model, b *log.Batch) *log.Batch {
			return newModel().batch(t, fresh("empty"))
		}},
		{"batch built ahead", func(t *testing.T, m *model, b *log.Batch) *log.Batch {
			ahead := m.prefix(len(m.batches))
			ahead.apply(b)
			return ahead.batch(t, fresh("ahead"))
		}},
		// Start or size changed.
		{"start behind", func(t *testing.T, m *model, b *log.Batch) *log.Batch { b.Start--; b.State.Size--; return b }},
		{"start ahead", func(t *testing.T, m *model, b *log.Batch) *log.Batch { b.Start++; b.State.Size++; return b }},
		{"state size too large", func(t *testing.T, m *model, b *log.Batch) *log.Batch { b.State.Size++; return b }},
		{"state size too small", func(t *testing.T, m *model, b *log.Batch) *log.Batch { b.State.Size--; return b }},
		{"state size unchanged", func(t *testing.T, m *model, b *log.Batch) *log.Batch { b.State.Size = b.Start; return b }},
		// A new checkpoint for the same size: nothing to commit.
		{"no entries", func(t *testing.T, m *model, b *log.Batch) *log.Batch {
			return &log.Batch{Start: m.size(), State: log.State{
				Size:       m.size(),
				Range:      cloneHashes(m.state.Range),
				Checkpoint: []byte("another checkpoint for the same size"),
			}}
		}},
	})
	t.Run("start not zero on empty store", func(t *testing.T) {
		h := start(t, newStore)
		m := newModel()
		ahead := newModel()
		ahead.apply(ahead.batch(t, [][]byte{[]byte("never committed")}))
		b := ahead.batch(t, randomEntries(rand.New(rand.NewPCG(3, 3)), nil, 3))
		if err := h.s.Commit(t.Context(), b); err == nil {
			t.Fatalf("Commit(batch at 1 on an empty store) succeeded, want refusal")
		}
		checkNothingWritten(t, h.s, m, b)
		checkStore(t, h.s, m, rand.New(rand.NewPCG(3, 3)))
	})
}

func testRefuseMalformed(t *testing.T, newStore newStoreFunc) {
	change := func(f func(b *log.Batch)) func(*testing.T, *model, *log.Batch) *log.Batch {
		return func(_ *testing.T, _ *model, b *log.Batch) *log.Batch { f(b); return b }
	}
	testRefusals(t, newStore, []refusalCase{
		{"nil batch", func(*testing.T, *model, *log.Batch) *log.Batch { return nil }},
		{"missing leaf hash", change(func(b *log.Batch) { b.LeafHashes = b.LeafHashes[1:] })},
		{"short leaf hash", change(func(b *log.Batch) { b.LeafHashes[0] = b.LeafHashes[0][:31] })},
		{"missing range hash", change(func(b *log.Batch) { b.State.Range = b.State.Range[1:] })},
		{"extra range hash", change(func(b *log.Batch) { b.State.Range = append(b.State.Range, b.State.Range[0]) })},
		{"short range hash", change(func(b *log.Batch) { b.State.Range[0] = b.State.Range[0][:31] })},
		{"short node hash", change(func(b *log.Batch) {
			for i, n := range b.Nodes {
				if n.ID.Level > 0 {
					b.Nodes[i].Hash = n.Hash[:16]
					return
				}
			}
		})},
		{"node of an old leaf", change(func(b *log.Batch) {
			b.Nodes = append(b.Nodes, log.Node{ID: compact.NewNodeID(0, b.Start-1), Hash: b.LeafHashes[0]})
		})},
		{"node past the new size", change(func(b *log.Batch) {
			b.Nodes = append(b.Nodes, log.Node{ID: compact.NewNodeID(0, b.State.Size), Hash: b.LeafHashes[0]})
		})},
		{"incomplete node", change(func(b *log.Batch) {
			b.Nodes = append(b.Nodes, log.Node{ID: compact.NewNodeID(40, 0), Hash: b.LeafHashes[0]})
		})},
		{"leaf node differs from leaf hash", change(func(b *log.Batch) {
			for i, n := range b.Nodes {
				if n.ID.Level == 0 {
					b.Nodes[i].Hash = rfc6962.DefaultHasher.HashLeaf([]byte("other"))
					return
				}
			}
		})},
	})
}

// testRefusals commits two batches, then for each case offers what the case
// makes of a third batch, checks that Commit refuses it and that nothing of
// it can be read, then commits a good batch and checks again after
// reopening.
func testRefusals(t *testing.T, newStore newStoreFunc, cases []refusalCase) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(4, 4))
	commit(t, h.s, m, randomEntries(r, m, 5))
	commit(t, h.s, m, randomEntries(r, m, 6))

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := m.batch(t, randomEntries(r, nil, 7))
			offered := tc.mutate(t, m, b)
			if err := h.s.Commit(t.Context(), offered); err == nil {
				t.Fatalf("Commit succeeded, want refusal")
			}
			if offered != nil {
				checkNothingWritten(t, h.s, m, offered)
			}
			checkNothingWritten(t, h.s, m, b)
		})
	}
	commit(t, h.s, m, randomEntries(r, m, 7))
	checkStore(t, h.s, m, r)
	h.restart()
	checkStore(t, h.s, m, r)
}

// checkNothingWritten checks that no part of the refused batch b is visible.
func checkNothingWritten(t *testing.T, s log.Storage, m *model, b *log.Batch) {
	t.Helper()
	ctx := t.Context()
	st, err := s.State(ctx)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if !stateEqual(st, m.state) {
		t.Fatalf("State() after refusal = %s, want %s", fmtState(st), fmtState(m.state))
	}
	size := m.size()
	checkNotFound(t, "Entries past the size", func() error { _, err := s.Entries(ctx, size, size+1); return err })
	checkNotFound(t, "ReadNodes past the size", func() error {
		_, err := s.ReadNodes(ctx, []compact.NodeID{compact.NewNodeID(0, size)})
		return err
	})
	for _, lh := range b.LeafHashes {
		if m.hasLeaf(lh) {
			continue // a replayed batch
		}
		checkNotFound(t, "LeafIndex of a refused leaf", func() error { _, err := s.LeafIndex(ctx, lh); return err })
	}
	if _, ok := m.cps[b.State.Size]; !ok {
		checkNotFound(t, fmt.Sprintf("Checkpoint(%d) of the refused batch", b.State.Size), func() error {
			_, err := s.Checkpoint(ctx, b.State.Size)
			return err
		})
	} else if cp, err := s.Checkpoint(ctx, b.State.Size); err != nil || !bytes.Equal(cp, m.cps[b.State.Size]) {
		t.Fatalf("Checkpoint(%d) after refusal = %q, %v; want %q", b.State.Size, cp, err, m.cps[b.State.Size])
	}
}

func testNotFound(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(5, 5))
	commit(t, h.s, m, randomEntries(r, m, 5))
	commit(t, h.s, m, randomEntries(r, m, 3))
	ctx := t.Context()
	s := h.s

	for _, c := range [][2]uint64{{0, 9}, {8, 9}, {9, 9}, {9, 10}, {5, 4}, {8, 7}, {1, 0}, {0, 1 << 63}} {
		checkNotFound(t, fmt.Sprintf("Entries(%d, %d)", c[0], c[1]), func() error {
			_, err := s.Entries(ctx, c[0], c[1])
			return err
		})
	}
	for _, ids := range [][]compact.NodeID{
		{{Level: 0, Index: 8}},
		{{Level: 0, Index: 1 << 40}},
		{{Level: 3, Index: 1}}, // covers [8, 16)
		{{Level: 4, Index: 0}}, // covers [0, 16)
		{{Level: 63, Index: 0}},
		{{Level: 0, Index: 0}, {Level: 0, Index: 8}},
		{{Level: 3, Index: 0}, {Level: 1, Index: 4}}, // covers [8, 10)
	} {
		checkNotFound(t, fmt.Sprintf("ReadNodes(%v)", ids), func() error {
			_, err := s.ReadNodes(ctx, ids)
			return err
		})
	}
	for _, lh := range [][]byte{
		rfc6962.DefaultHasher.HashLeaf([]byte("never appended")),
		make([]byte, 32),
		m.hashes[0][:31],
		nil,
	} {
		checkNotFound(t, fmt.Sprintf("LeafIndex(%x)", lh), func() error {
			_, err := s.LeafIndex(ctx, lh)
			return err
		})
	}
	for _, size := range []uint64{0, 1, 4, 6, 9, 1 << 63} {
		checkNotFound(t, fmt.Sprintf("Checkpoint(%d)", size), func() error {
			_, err := s.Checkpoint(ctx, size)
			return err
		})
	}
	checkStore(t, s, m, r)
}

func testCopies(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(6, 6))
	ctx := t.Context()

	// Commit must not keep b's slices: scribble over them afterwards.
	b := commit(t, h.s, m, randomEntries(r, m, 9))
	for _, e := range b.Entries {
		clear(e)
	}
	for _, lh := range b.LeafHashes {
		clear(lh)
	}
	for _, n := range b.Nodes {
		clear(n.Hash)
	}
	for _, rh := range b.State.Range {
		clear(rh)
	}
	clear(b.State.Checkpoint)
	checkStore(t, h.s, m, r)

	// Callers own what reads return: scribble over it and read again.
	st, err := h.s.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rh := range st.Range {
		clear(rh)
	}
	clear(st.Checkpoint)
	es, err := h.s.Entries(ctx, 0, m.size())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		clear(e)
	}
	hs, err := h.s.ReadNodes(ctx, compact.RangeNodes(0, m.size(), nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, hh := range hs {
		clear(hh)
	}
	cp, err := h.s.Checkpoint(ctx, m.size())
	if err != nil {
		t.Fatal(err)
	}
	clear(cp)
	err = h.s.Checkpoints(ctx, 0, func(_ uint64, note []byte) error { clear(note); return nil })
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, h.s, m, r)
}

func testClosed(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(7, 7))
	commit(t, h.s, m, randomEntries(r, m, 4))
	s := h.s
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.s = nil
	ctx := t.Context()
	next := m.batch(t, randomEntries(r, m, 2))
	calls := map[string]func() error{
		"Commit":      func() error { return s.Commit(ctx, next) },
		"State":       func() error { _, err := s.State(ctx); return err },
		"Entries":     func() error { _, err := s.Entries(ctx, 0, 1); return err },
		"ReadNodes":   func() error { _, err := s.ReadNodes(ctx, []compact.NodeID{{Level: 0, Index: 0}}); return err },
		"LeafIndex":   func() error { _, err := s.LeafIndex(ctx, m.hashes[0]); return err },
		"Checkpoint":  func() error { _, err := s.Checkpoint(ctx, m.size()); return err },
		"Checkpoints": func() error { return s.Checkpoints(ctx, 0, func(uint64, []byte) error { return nil }) },
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Errorf("%s after Close succeeded, want an error", name)
		} else if errors.Is(err, log.ErrNotFound) {
			t.Errorf("%s after Close = %v, want an error other than ErrNotFound", name, err)
		}
	}

	// The closed handle wrote nothing; a new one carries on.
	h.s = h.reopen()
	checkStore(t, h.s, m, r)
	commit(t, h.s, m, randomEntries(r, m, 2))
	checkStore(t, h.s, m, r)
}

func testReopen(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{1, 2, 300, 17} {
		commit(t, h.s, m, randomEntries(r, m, n))
	}
	h.restart()
	checkStore(t, h.s, m, r)
	for _, n := range []int{5, 256, 1} {
		commit(t, h.s, m, randomEntries(r, m, n))
	}
	checkStore(t, h.s, m, r)
	h.restart()
	checkStore(t, h.s, m, r)
}

// testConcurrent runs readers while one goroutine commits. Every read is
// checked against the state the reader saw: whatever a store reports as
// committed must be complete and must stay readable.
func testConcurrent(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	s := h.s
	ctx := t.Context()

	// Build every batch up front, so readers know what any size must hold.
	r := rand.New(rand.NewPCG(9, 9))
	m := newModel()
	var batches []*log.Batch
	for range 40 {
		b := m.batch(t, randomEntries(r, m, 1+r.IntN(64)))
		m.apply(b)
		batches = append(batches, b)
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(10, uint64(w)))
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := readConsistent(ctx, s, m, r, &last); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for _, b := range batches {
		if err := s.Commit(ctx, b); err != nil {
			t.Errorf("Commit(batch [%d, %d)): %v", b.Start, b.State.Size, err)
			break
		}
	}
	close(done)
	wg.Wait()
	if !t.Failed() {
		checkStore(t, s, m, r)
	}
}

// readConsistent reads the state, then checks a sample of what that state
// promises against the model, which holds every batch the writer will
// commit. It is called from several goroutines, so it reports errors
// instead of failing the test.
func readConsistent(ctx context.Context, s log.Storage, m *model, r *rand.Rand, last *uint64) error {
	st, err := s.State(ctx)
	if err != nil {
		return fmt.Errorf("State: %v", err)
	}
	size := st.Size
	if size < *last {
		return fmt.Errorf("State().Size went back from %d to %d", *last, size)
	}
	*last = size
	if size == 0 {
		return nil
	}
	if !bytes.Equal(st.Checkpoint, m.cps[size]) {
		return fmt.Errorf("State() at size %d has checkpoint %q, want %q", size, st.Checkpoint, m.cps[size])
	}
	cr, err := m.rf.NewRange(0, size, st.Range)
	if err != nil {
		return fmt.Errorf("NewRange(state at %d): %v", size, err)
	}
	root, _ := cr.GetRootHash(nil)
	if want := m.tree.HashAt(size); !bytes.Equal(root, want) {
		return fmt.Errorf("root of state at %d = %x, want %x", size, root, want)
	}
	if cp, err := s.Checkpoint(ctx, size); err != nil || !bytes.Equal(cp, m.cps[size]) {
		return fmt.Errorf("Checkpoint(%d) = %q, %v; want %q", size, cp, err, m.cps[size])
	}

	i := r.Uint64N(size)
	nodes, err := proof.Inclusion(i, size)
	if err != nil {
		return err
	}
	hashes, err := s.ReadNodes(ctx, nodes.IDs)
	if err != nil {
		return fmt.Errorf("ReadNodes(inclusion %d in %d): %v", i, size, err)
	}
	p, err := nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
	if err != nil {
		return err
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, i, size, m.hashes[i], p, root); err != nil {
		return fmt.Errorf("inclusion of %d in %d: %v", i, size, err)
	}

	end := min(i+5, size)
	es, err := s.Entries(ctx, i, end)
	if err != nil {
		return fmt.Errorf("Entries(%d, %d): %v", i, end, err)
	}
	for j, e := range es {
		if !bytes.Equal(e, m.entries[i+uint64(j)]) {
			return fmt.Errorf("Entries(%d, %d)[%d] differs", i, end, j)
		}
	}

	g, err := s.LeafIndex(ctx, m.hashes[i])
	if err != nil {
		return fmt.Errorf("LeafIndex(leaf %d): %v", i, err)
	}
	if g >= uint64(len(m.hashes)) || !bytes.Equal(m.hashes[g], m.hashes[i]) {
		return fmt.Errorf("LeafIndex(leaf %d) = %d, whose leaf hash differs", i, g)
	}

	n := 0
	err = s.Checkpoints(ctx, size, func(sz uint64, note []byte) error {
		if n++; n == 1 && sz != size {
			return fmt.Errorf("first checkpoint from %d has size %d", size, sz)
		}
		if !bytes.Equal(note, m.cps[sz]) {
			return fmt.Errorf("checkpoint %d = %q, want %q", sz, note, m.cps[sz])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("Checkpoints(%d): %v", size, err)
	}
	return nil
}

// testBigEntries commits entries of the largest size a log entry may have,
// 65,535 bytes, one alone and 64 in one batch.
func testBigEntries(t *testing.T, newStore newStoreFunc) {
	h := start(t, newStore)
	m := newModel()
	r := rand.New(rand.NewPCG(11, 11))
	big := func(n int) [][]byte {
		es := make([][]byte, n)
		for i := range es {
			e := make([]byte, 65535)
			for j := range e {
				e[j] = byte(r.Uint32())
			}
			es[i] = e
		}
		return es
	}
	commit(t, h.s, m, big(1))
	commit(t, h.s, m, append(big(64), []byte{}, []byte("small")))
	checkStore(t, h.s, m, r)
	h.restart()
	checkStore(t, h.s, m, r)
}

func stateEqual(a, b log.State) bool {
	return a.Size == b.Size && hashesEqual(a.Range, b.Range) && bytes.Equal(a.Checkpoint, b.Checkpoint)
}

func hashesEqual(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

func fmtState(s log.State) string {
	return fmt.Sprintf("{Size: %d, Range: %x, Checkpoint: %q}", s.Size, s.Range, s.Checkpoint)
}

func cloneHashes(hs [][]byte) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = bytes.Clone(h)
	}
	return out
}

func cloneBatch(b *log.Batch) *log.Batch {
	c := &log.Batch{Start: b.Start, Entries: cloneHashes(b.Entries), LeafHashes: cloneHashes(b.LeafHashes), State: cloneState(b.State)}
	for _, n := range b.Nodes {
		c.Nodes = append(c.Nodes, log.Node{ID: n.ID, Hash: bytes.Clone(n.Hash)})
	}
	return c
}
