package rekor_test

import (
	"bytes"
	"context"
	"crypto"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
	"github.com/provlog/provlog/anchor/rekor"
)

// FuzzCheck: stored entries are untrusted input; Check and Checkpoint
// (what the audit compares across records) must never panic.
func FuzzCheck(f *testing.F) {
	fr := fakerekor.New(f)
	key := newKey(f)
	d := digestOf("checkpoint")
	e, err := (&online.RekorClient{URL: fr.URL, PublicKey: fr.PublicKey, Signer: key}).Upload(context.Background(), d)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(e.Entry))
	f.Add([]byte(`{"body":"","verification":{"inclusionProof":{}}}`))
	f.Add([]byte(`{"body":1,"integratedTime":1,"logID":"","logIndex":1,"verification":{"signedEntryTimestamp":"AA==","inclusionProof":{"checkpoint":"x","logIndex":-1,"rootHash":"","treeSize":1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := *e
		c.Entry = b
		c.Check(context.Background(), d, &key.PublicKey, []crypto.PublicKey{fr.PublicKey})
		c.Checkpoint()
	})
}

// FuzzCheckConsistency: a stored consistency proof's earlier checkpoint
// is untrusted input too; Check must never panic on it.
func FuzzCheckConsistency(f *testing.F) {
	fr := fakerekor.New(f)
	key := newKey(f)
	c := &online.RekorClient{URL: fr.URL, PublicKey: fr.PublicKey, Signer: key}
	first, err := c.Upload(context.Background(), digestOf("first"))
	if err != nil {
		f.Fatal(err)
	}
	d := digestOf("second")
	e, err := c.Upload(context.Background(), d)
	if err != nil {
		f.Fatal(err)
	}
	if err := c.Link(context.Background(), e, first, d); err != nil || e.Consistency == nil {
		f.Fatalf("link: %v", err)
	}
	good := *e.Consistency
	f.Add([]byte(good.Checkpoint), bytes.Join(good.Proof, nil))
	f.Add([]byte("rekor.fake - 4242424242\n1\nAAAA\n\n— rekor.fake AAAAAAA=\n"), []byte{})
	f.Fuzz(func(t *testing.T, note, proof []byte) {
		x := *e
		var hashes [][]byte
		for len(proof) >= 32 {
			hashes, proof = append(hashes, proof[:32]), proof[32:]
		}
		x.Consistency = &rekor.Consistency{Checkpoint: string(note), Proof: hashes}
		x.Check(context.Background(), d, &key.PublicKey, []crypto.PublicKey{fr.PublicKey})
	})
}
