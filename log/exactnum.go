package log

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxExactInt is the largest magnitude up to which every integer is a
// double (2^53).
const maxExactInt = 1 << 53

// ExactNumbers returns an error naming the first number in raw, a JSON
// value that [Canonicalize] accepts, whose JCS form is another number: an
// integer that no double equals (beyond ±2^53: 12345678901234567891 is
// written 12345678901234567000) or a number other than zero that
// underflows to 0 (1e-400). RFC 8785 holds numbers as doubles, and I-JSON
// (RFC 7493 §2.2) tells senders to write such numbers as strings; a number
// out of the double's range (1e999) [Canonicalize] refuses itself.
// Fractions are the double a reader takes them as (0.1000000000000000055
// is 0.1), as every JSON number is, and pass.
//
// A call's arguments holding such a number are refused (the entry would
// name another call than the one made), and a result holding one is
// hashed as received ([ResultSum]): two results apart only there would
// have one JCS form. The scan is linear and allocates nothing unless a
// number has 16 digits or more.
func ExactNumbers(raw []byte) error {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			i = stringEnd(raw, i)
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if err := exactNumber(raw[i:j]); err != nil {
				return err
			}
			i = j - 1
		}
	}
	return nil
}

// stringEnd returns the index of the quote that ends the JSON string
// opening at raw[open] (len(raw) if none does).
func stringEnd(raw []byte, open int) int {
	for j := open + 1; ; j++ {
		k := bytes.IndexByte(raw[j:], '"')
		if k < 0 {
			return len(raw)
		}
		j += k
		escapes := 0
		for b := j - 1; b > open && raw[b] == '\\'; b-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j
		}
	}
}

// exactNumber checks one JSON number literal (see [ExactNumbers]).
func exactNumber(lit []byte) error {
	integer := bytes.IndexAny(lit, ".eE") < 0
	digits := bytes.TrimLeft(bytes.TrimPrefix(lit, []byte("-")), "0")
	if integer && len(digits) < 16 {
		return nil // within ±2^53 (16 digits start at 10^15 < 2^53 < 10^16)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil // out of range: JCS refuses it with its own words
	}
	if !integer {
		mantissa, _, _ := bytes.Cut(lit, []byte("e"))
		mantissa, _, _ = bytes.Cut(mantissa, []byte("E"))
		if f == 0 && bytes.ContainsAny(mantissa, "123456789") {
			return fmt.Errorf("the number %s is too small for a double and would be recorded as 0; send it as a string", cutNumber(lit))
		}
		return nil
	}
	if f > -maxExactInt && f < maxExactInt {
		return nil
	}
	want, _ := new(big.Int).SetString(string(lit), 10)
	got, _ := big.NewFloat(f).Int(nil)
	if want.Cmp(got) != 0 {
		return fmt.Errorf("the integer %s is beyond ±2^53 and would be recorded as %s; send it as a string", cutNumber(lit), appendJCSNumber(nil, f))
	}
	return nil
}

// cutNumber is lit, ASCII, for an error message, cut short after 64
// bytes.
func cutNumber(lit []byte) string {
	if len(lit) <= 64 {
		return string(lit)
	}
	return string(lit[:64]) + "…"
}
