package server

import (
	"bytes"
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
)

// CheckHandedOut checks the stored tree against a checkpoint that left
// the process, found outside the store (source names where: an anchor
// record, the witnesses' cosigned checkpoint): the tree must be at least
// as large and have the same root at its size. A checkpoint not signed
// by v is not the log's and is an error too. It returns a
// *[log.LostError] when the tree is shorter or differs: the log must not
// serve, since its next checkpoint would fork from the one handed out.
func CheckHandedOut(ctx context.Context, store log.Storage, v note.Verifier, source string, cp []byte) error {
	c, _, err := log.OpenCheckpoint(cp, v)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	st, err := store.State(ctx)
	if err != nil {
		return fmt.Errorf("reading log state: %w", err)
	}
	if c.Size > st.Size {
		return &log.LostError{Source: source, Size: c.Size, Root: c.Hash, HeldSize: st.Size, HeldRoot: log.RangeRoot(st.Size, st.Range)}
	}
	rng := st.Range
	if c.Size < st.Size {
		ids := compact.RangeNodes(0, c.Size, nil)
		if rng, err = store.ReadNodes(ctx, ids); err != nil {
			return fmt.Errorf("reading the tree at size %d: %w", c.Size, err)
		}
	}
	if root := log.RangeRoot(c.Size, rng); !bytes.Equal(root, c.Hash) {
		return &log.LostError{Source: source, Size: c.Size, Root: c.Hash, HeldSize: st.Size, HeldRoot: root}
	}
	return nil
}
