package opp_test

import (
	"testing"

	"github.com/provlog/provlog/opp"
)

// FuzzParseCallKey: a fence key read from a shared store is a call's key
// only if CallKey writes exactly it, and every call's key parses back.
func FuzzParseCallKey(f *testing.F) {
	for _, s := range []string{"call:0", "call:17", "call:18446744073709551615", "call:18446744073709551616", "call:017", "call:+1", "call:", "t_ab", "provlog/genesis", "call:1 "} {
		f.Add(s, uint64(len(s)))
	}
	f.Fuzz(func(t *testing.T, key string, n uint64) {
		if c, ok := opp.ParseCallKey(key); ok && opp.CallKey(c) != key {
			t.Fatalf("ParseCallKey(%q) = %d, whose key is %q", key, c, opp.CallKey(c))
		}
		if c, ok := opp.ParseCallKey(opp.CallKey(n)); !ok || c != n {
			t.Fatalf("ParseCallKey(CallKey(%d)) = %d, %v", n, c, ok)
		}
	})
}
