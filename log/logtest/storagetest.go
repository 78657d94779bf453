package logtest

import (
	"testing"

	"github.com/provlog/provlog/log"
)

// TestStorage checks that a [log.Storage] keeps the contract, in the manner
// of golang.org/x/mod/sumdb/storage.TestStorage.
//
// newStore returns an empty store s and a function reopen. The suite calls
// reopen only after it has closed s; reopen must return a new handle on the
// same data (Open on the same directory, [Memory.Reopen]) and fail t if it
// cannot. The suite closes every handle it is given.
//
// The suite's files: its cases in cases.go, refusals.go (batches a store
// must refuse) and concurrent.go (readers during commits); the reference
// it checks against in model.go; the checks of a store against it in
// checks.go.
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
