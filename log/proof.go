package log

import (
	"context"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// ProveInclusion returns the RFC 6962 inclusion proof for the leaf at index
// in the tree of the given size, built from the stored perfect nodes r holds.
func ProveInclusion(ctx context.Context, r NodeReader, index, size uint64) ([][]byte, error) {
	if index >= size {
		return nil, fmt.Errorf("inclusion proof: index %d is not below size %d", index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof: %w", err)
	}
	return fetchProof(ctx, r, nodes)
}

// ProveReceipt returns the receipt of the entry at index with leaf hash
// leafHash in the tree of the given size, whose signed checkpoint note is
// checkpoint: its inclusion proof built from the nodes r holds. Every
// receipt provlog makes is assembled here.
func ProveReceipt(ctx context.Context, r NodeReader, index, size uint64, leafHash, checkpoint []byte) (*Receipt, error) {
	p, err := ProveInclusion(ctx, r, index, size)
	if err != nil {
		return nil, err
	}
	return &Receipt{Extra: leafHash, Index: index, Proof: p, Checkpoint: checkpoint}, nil
}

// ProveConsistency returns the RFC 6962 consistency proof from the tree of
// size old to the tree of size new. The proof is empty when old is 0 or
// equals new.
func ProveConsistency(ctx context.Context, r NodeReader, old, new uint64) ([][]byte, error) {
	if old > new {
		return nil, fmt.Errorf("consistency proof: old size %d is above new size %d", old, new)
	}
	nodes, err := proof.Consistency(old, new)
	if err != nil {
		return nil, fmt.Errorf("consistency proof: %w", err)
	}
	return fetchProof(ctx, r, nodes)
}

func fetchProof(ctx context.Context, r NodeReader, nodes proof.Nodes) ([][]byte, error) {
	if len(nodes.IDs) == 0 {
		return [][]byte{}, nil
	}
	hashes, err := r.ReadNodes(ctx, nodes.IDs)
	if err != nil {
		return nil, fmt.Errorf("reading proof nodes: %w", err)
	}
	// Rehash may modify its input in place; hashes is ours.
	p, err := nodes.Rehash(hashes, NodeHash)
	if err != nil {
		return nil, fmt.Errorf("rehashing proof: %w", err)
	}
	return p, nil
}

// VerifyInclusion checks that leafHash is at index in the tree of the given
// size whose root is root.
func VerifyInclusion(index, size uint64, leafHash []byte, p [][]byte, root []byte) error {
	return readableMismatch(proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leafHash, p, root))
}

// VerifyConsistency checks that the tree of size old with root oldRoot is a
// prefix of the tree of size new with root newRoot.
func VerifyConsistency(old, new uint64, p [][]byte, oldRoot, newRoot []byte) error {
	return readableMismatch(proof.VerifyConsistency(rfc6962.DefaultHasher, old, new, p, oldRoot, newRoot))
}

// readableMismatch writes the merkle package's root mismatch (printed as
// Go byte slices) as hex.
func readableMismatch(err error) error {
	var rm proof.RootMismatchError
	if errors.As(err, &rm) {
		return fmt.Errorf("the proof leads to root %x, but the checkpoint's root is %x", rm.CalculatedRoot, rm.ExpectedRoot)
	}
	return err
}

// RootFromInclusion returns the root that the inclusion proof p leads to
// from leafHash at index in a tree of the given size; a verifier compares
// it with (or checks a signature over) the root it trusts.
func RootFromInclusion(index, size uint64, leafHash []byte, p [][]byte) ([]byte, error) {
	return proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leafHash, p)
}
