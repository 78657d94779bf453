package bundle

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzParseGenesisProof: genesis.proof's parser never panics, takes at
// most 64 hashes, and what it takes is the file's words decoded.
func FuzzParseGenesisProof(f *testing.F) {
	h := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	f.Add([]byte(h + "\n" + h + "\n"))
	f.Add([]byte(strings.Repeat(h+"\n", 65)))
	f.Add([]byte(" x \n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseGenesisProof(b)
		if err != nil {
			return
		}
		words := bytes.Fields(b)
		if len(p) > maxProofHashes || len(p) != len(words) {
			t.Fatalf("%q: %d hashes of %d words", b, len(p), len(words))
		}
		for i, w := range words {
			if base64.StdEncoding.EncodeToString(p[i]) != string(w) {
				t.Fatalf("%q: hash %d is %x, the word %q", b, i, p[i], w)
			}
		}
	})
}
