package log

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestResultSum: a result is named by the hash of its JCS form, or, when
// JCS cannot represent it, of its bytes as received, and the form is
// said; a JCS form the caller made already is hashed as given.
func TestResultSum(t *testing.T) {
	hexSum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	for _, c := range []struct {
		raw, canon, hashed string
		asReceived         bool
	}{
		{raw: `{ "b":1, "a":"x" }`, hashed: `{"a":"x","b":1}`},
		{raw: `{ "b":1, "a":"x" }`, canon: `{"a":"x","b":1}`, hashed: `{"a":"x","b":1}`},
		{raw: `{"t":"\ud800"}`, hashed: `{"t":"\ud800"}`, asReceived: true},
		{raw: `{"a":1, "a":2}`, hashed: `{"a":1, "a":2}`, asReceived: true},
		{raw: `{"n":1e999}`, hashed: `{"n":1e999}`, asReceived: true},
	} {
		var canon []byte
		if c.canon != "" {
			canon = []byte(c.canon)
		}
		sum, hashed, asReceived := ResultSum([]byte(c.raw), canon)
		if string(hashed) != c.hashed || sum != hexSum(c.hashed) || asReceived != c.asReceived {
			t.Errorf("ResultSum(%s) = %s, %s, %v; want %s, %s, %v", c.raw, sum, hashed, asReceived, hexSum(c.hashed), c.hashed, c.asReceived)
		}
	}
}
