package logtest

// The model: the reference a store is checked against, and the batches
// built from it.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

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
