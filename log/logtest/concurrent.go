package logtest

// Readers concurrent with commits.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

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
