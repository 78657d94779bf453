package online

import (
	"strings"
	"testing"
)

// FuzzParseCreated: Rekor's answer is untrusted until Check accepts it;
// reading it must never panic, and what it keeps of the entry is the
// entry's bytes.
func FuzzParseCreated(f *testing.F) {
	f.Add([]byte(`{"24296fb24b8ad77a0f1d3c1f5b2b1a9e0c0e7f3a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e":{"body":"e30=","integratedTime":1,"logID":"ab","logIndex":0,"verification":{"inclusionProof":{"checkpoint":"x","hashes":[],"logIndex":0,"rootHash":"00","treeSize":1},"signedEntryTimestamp":"AA=="}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":1,"b":2}`))
	f.Add([]byte(`{"a":{"logIndex":"x"}}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseCreated(b)
		if err != nil {
			return
		}
		if len(e.Entry) == 0 || len(e.Entry) > len(b) {
			t.Fatalf("entry of %d bytes from an answer of %d", len(e.Entry), len(b))
		}
	})
}

// FuzzParseProof: Rekor's consistency proof is untrusted until the check
// of the entry it links accepts it; reading it must never panic, and
// every hash it keeps is a SHA-256.
func FuzzParseProof(f *testing.F) {
	f.Add([]byte(`{"rootHash":"00","hashes":["` + strings.Repeat("ab", 32) + `"]}`))
	f.Add([]byte(`{"hashes":[]}`))
	f.Add([]byte(`{"hashes":["zz"]}`))
	f.Add([]byte(`{"hashes":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProof(b)
		if err != nil {
			return
		}
		for i, h := range p {
			if len(h) != 32 {
				t.Fatalf("hash %d of %d bytes", i, len(h))
			}
		}
	})
}
