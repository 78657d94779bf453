package logtest

// The checks of a store against the model: its state, entries, proofs
// rebuilt from its nodes, checkpoints and lookups.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

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
