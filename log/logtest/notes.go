package logtest

import (
	"encoding/base64"
	"strings"
	"testing"
)

// CorruptSignature flips a bit in the signature by name in the signed
// note msg, failing tb when there is none.
func CorruptSignature(tb testing.TB, msg []byte, name string) []byte {
	tb.Helper()
	lines := strings.SplitAfter(string(msg), "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "— "+name+" "); ok {
			sig, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(rest, "\n"))
			sig[len(sig)-1] ^= 1
			lines[i] = "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
			return []byte(strings.Join(lines, ""))
		}
	}
	tb.Fatalf("no signature by %s", name)
	return nil
}
