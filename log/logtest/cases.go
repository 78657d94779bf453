package logtest

// The suite's cases of an empty, growing, reopened and closed store, of
// what it does not hold, of the copies it hands out and of big entries.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

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
