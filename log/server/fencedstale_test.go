package server

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

// twiceBuilt is a shared store of one writer whose CommitShared builds
// twice when armed, as log.SharedStorage allows and logpg does: first on
// the state it knows assuming no fence failed (one round trip), then, at
// the serialization point, with the fences as they stand, here all
// failed (another sidecar committed an entry of the task first).
type twiceBuilt struct {
	*logtest.Memory
	mu    sync.Mutex
	armed bool
}

func (s *twiceBuilt) CommitShared(ctx context.Context, fences []log.Fence, build func(log.State, []bool) (*log.Batch, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.State(ctx)
	if err != nil {
		return err
	}
	fenced := make([]bool, len(fences))
	b, err := build(st, fenced)
	if err != nil {
		return err
	}
	if s.armed && len(fences) > 0 {
		for i := range fenced {
			fenced[i] = true
		}
		if b, err = build(st, fenced); err != nil {
			return err
		}
	}
	if b == nil {
		return nil
	}
	return s.Commit(ctx, b)
}

func (s *twiceBuilt) Latest(ctx context.Context) (log.State, error) { return s.State(ctx) }
func (s *twiceBuilt) Follow(func(log.State))                        {}

// TestFencedOffKeepsCheckpoint: when a shared store builds a fenced
// append's batch twice and the second build, on the fences as they stand,
// leaves nothing to commit, nothing was committed, and the sequencer must
// go on serving the stored checkpoint. Before, commitShared kept the
// size and checkpoint of the first build (signed over an entry that was
// never committed) and served it as the latest and showed it (handed-out):
// a second signed checkpoint of a size the store holds with another root,
// a fork signed by the log's key; every receipt the sidecar gives then
// fails to verify (seen with two sidecars on PostgreSQL racing a claim:
// one served size 92 with a root no entry of the log hashes to).
func TestFencedOffKeepsCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := &twiceBuilt{Memory: logtest.NewMemory()}
	signer, verifier := logtest.NewKey(t, "provlog.test/fenced")
	seq, err := OpenSequencer(ctx, store, signer, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if !seq.Shared() {
		t.Fatal("the sequencer does not see the store as shared")
	}
	if _, err := seq.Append(ctx, []byte(`{"n":0}`)); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	_, err = seq.AppendFenced(ctx, []byte(`{"n":1}`), log.Fence{Key: "t_1", After: 1})
	if !errors.Is(err, log.ErrFenced) {
		t.Fatalf("AppendFenced = %v, want ErrFenced", err)
	}
	st, _ := store.State(ctx)
	size, cp := seq.Checkpoint()
	if size != st.Size || string(cp) != string(st.Checkpoint) {
		t.Errorf("after a fenced-off append the sequencer serves a checkpoint of size %d:\n%s\nthe store holds size %d:\n%s", size, cp, st.Size, st.Checkpoint)
	}
}
