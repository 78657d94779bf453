package log

import (
	"crypto/sha256"
	"encoding/hex"
)

// ResultSum is how an entry names a result received as raw: the hex
// SHA-256 of its JCS form or, when that form would not tell raw from
// another result, of raw itself, asReceived saying so (result_canonical:
// false). That is when [Canonicalize] refuses raw (not I-JSON), and when
// raw holds a number its JCS form writes as another ([ExactNumbers]:
// {"id":12345678901234567891} and {"id":12345678901234567890} have one
// JCS form). It returns the bytes it hashed. canon, if not nil, is raw's
// JCS form, made already by the caller. The proxy names call results and
// reads by it, and replay compares fresh results by it, so that a marker
// and a hash mean one thing wherever they are made.
func ResultSum(raw, canon []byte) (sum string, hashed []byte, asReceived bool) {
	hashed = canon
	if hashed == nil {
		var err error
		if hashed, err = Canonicalize(raw); err != nil {
			hashed, asReceived = raw, true
		}
	}
	if !asReceived && ExactNumbers(raw) != nil {
		hashed, asReceived = raw, true
	}
	s := sha256.Sum256(hashed)
	var h [2 * sha256.Size]byte // the hex on the stack: the string is the one allocation
	hex.Encode(h[:], s[:])
	return string(h[:]), hashed, asReceived
}
