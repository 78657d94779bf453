package logtest

// Refusals: batches a store must refuse, writing nothing.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

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
