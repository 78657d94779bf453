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
		// Numbers JCS writes as others: the form would not tell
		// {"id":12345678901234567891} from {"id":12345678901234567890}.
		{raw: `{"id":12345678901234567891}`, hashed: `{"id":12345678901234567891}`, asReceived: true},
		{raw: `{"id":12345678901234567891}`, canon: `{"id":12345678901234567000}`, hashed: `{"id":12345678901234567891}`, asReceived: true},
		{raw: `{ "n":[1e-400] }`, hashed: `{ "n":[1e-400] }`, asReceived: true},
		{raw: `{ "id":9007199254740992, "s":"12345678901234567891" }`, hashed: `{"id":9007199254740992,"s":"12345678901234567891"}`},
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

// TestResultSumTellsNumbersApart: two results apart only in an integer
// beyond ±2^53 have one JCS form; their sums differ, so a log names each,
// and a retained one cannot stand in for the other.
func TestResultSumTellsNumbersApart(t *testing.T) {
	a, _, _ := ResultSum([]byte(`{"id":12345678901234567891}`), nil)
	b, _, _ := ResultSum([]byte(`{"id":12345678901234567890}`), nil)
	if a == b {
		t.Errorf("ResultSum gives {\"id\":12345678901234567891} and {\"id\":12345678901234567890} one sum, %s", a)
	}
}
