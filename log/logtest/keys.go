package logtest

import (
	"crypto/rand"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// NewKey returns a fresh note signer and its verifier for a log named
// name, failing tb if either cannot be made.
func NewKey(tb testing.TB, name string) (note.Signer, note.Verifier) {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		tb.Fatal(err)
	}
	return s, v
}
