package bundle

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"unicode"
)

// maxProofHashes bounds an inclusion proof: a hash a level of a tree of
// up to 2^64 entries.
const maxProofHashes = 64

// parseGenesisProof parses genesis.proof, base64 hashes separated by
// white space (one a line, as export writes them), a word at a time: it
// stops at the first word that is no hash and at the 65th, so a forged
// file of millions of words is never split whole.
func parseGenesisProof(b []byte) ([][]byte, error) {
	var p [][]byte
	for {
		b = bytes.TrimLeftFunc(b, unicode.IsSpace)
		if len(b) == 0 {
			return p, nil
		}
		if len(p) == maxProofHashes {
			return nil, fmt.Errorf("holds more than the %d hashes an inclusion proof can have", maxProofHashes)
		}
		n := bytes.IndexFunc(b, unicode.IsSpace)
		if n < 0 {
			n = len(b)
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(b[:n]))
		if err != nil {
			return nil, fmt.Errorf("hash %d is not base64", len(p)+1)
		}
		p, b = append(p, h), b[n:]
	}
}
