package rekor_test

import (
	"context"
	"crypto"
	"testing"

	"github.com/provlog/provlog/anchor/anchortest/fakerekor"
	"github.com/provlog/provlog/anchor/online"
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
